// attn's training report: the loss curves, the learning-rate schedule and the throughput as
// SVG charts drawn from the data embedded in the page, then the sample and the configuration.
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("attn-data").textContent);
  const svgNS = "http://www.w3.org/2000/svg";
  const colours = { step: "#9ecae1", train: "#1f77b4", val: "#ff7f0e", lr: "#2ca02c", speed: "#9467bd" };

  function element(parent, name, attributes, text) {
    const e = document.createElementNS(svgNS, name);
    for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    parent.appendChild(e);
    return e;
  }

  // "Nice" tick values covering [lo, hi].
  function ticks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    const step0 = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(step0)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= step0);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
    return out;
  }
  function format(v) {
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(1) : String(+v.toPrecision(4));
  }

  // A line chart of series [{name, colour, points: [[x, y]…], width, dots}] with axes, labels,
  // a legend; log: the y axis in log10.
  function chart(svg, series, xLabel, yLabel, log) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = +svg.getAttribute("width"), H = +svg.getAttribute("height");
    const m = { left: 64, right: 16, top: 28, bottom: 40 };
    const all = series.flatMap((s) => s.points).filter((p) => !log || p[1] > 0);
    if (all.length === 0) {
      element(svg, "text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no data yet");
      return;
    }
    const fy = log ? (v) => Math.log10(v) : (v) => v;
    let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
    let y0 = Math.min(...all.map((p) => fy(p[1]))), y1 = Math.max(...all.map((p) => fy(p[1])));
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
    const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
    const sx = (x) => m.left + ((x - x0) / (x1 - x0)) * (W - m.left - m.right);
    const sy = (y) => H - m.bottom - ((fy(y) - y0) / (y1 - y0)) * (H - m.top - m.bottom);
    const yTicks = log ? ticks(y0, y1, 5).map((t) => Math.pow(10, t)) : ticks(y0, y1, 5);
    for (const t of yTicks) {
      element(svg, "line", { class: "grid", x1: m.left, x2: W - m.right, y1: sy(t), y2: sy(t) });
      element(svg, "text", { x: m.left - 6, y: sy(t) + 4, "text-anchor": "end" }, format(t));
    }
    for (const t of ticks(x0, x1, 6)) {
      element(svg, "text", { x: sx(t), y: H - m.bottom + 16, "text-anchor": "middle" }, format(t));
    }
    element(svg, "line", { class: "axis", x1: m.left, x2: m.left, y1: m.top, y2: H - m.bottom });
    element(svg, "line", { class: "axis", x1: m.left, x2: W - m.right, y1: H - m.bottom, y2: H - m.bottom });
    element(svg, "text", { x: (m.left + W - m.right) / 2, y: H - 6, "text-anchor": "middle" }, xLabel);
    element(svg, "text", { x: 14, y: (m.top + H - m.bottom) / 2, "text-anchor": "middle",
      transform: "rotate(-90 14 " + (m.top + H - m.bottom) / 2 + ")" }, yLabel + (log ? " (log scale)" : ""));
    let legendX = m.left + 8;
    for (const s of series) {
      const points = s.points.filter((p) => !log || p[1] > 0);
      if (points.length > 0) {
        element(svg, "path", { class: "series", "data-name": s.name, fill: "none", stroke: s.colour,
          "stroke-width": s.width || 1.5,
          d: points.map((p, i) => (i ? "L" : "M") + sx(p[0]).toFixed(1) + " " + sy(p[1]).toFixed(1)).join("") });
        if (s.dots) for (const p of points) element(svg, "circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.5, fill: s.colour });
      }
      element(svg, "rect", { x: legendX, y: 8, width: 12, height: 4, fill: s.colour });
      const label = element(svg, "text", { x: legendX + 16, y: 14, class: "legend" }, s.name);
      legendX += 24 + label.getComputedTextLength();
    }
  }

  const steps = data.steps, evals = data.evaluations;
  function drawLoss() {
    const log = document.getElementById("log-scale").checked;
    chart(document.getElementById("loss-chart"), [
      { name: "batch loss (each step)", colour: colours.step, points: steps.map((s) => [s.iter, s.loss]), width: 1 },
      { name: "train loss (evaluated)", colour: colours.train, points: evals.map((e) => [e.iter, e.train]), width: 2, dots: true },
      { name: "validation loss", colour: colours.val, points: evals.map((e) => [e.iter, e.val]), width: 2, dots: true },
    ], "iteration", "cross-entropy loss (nats)", log);
  }
  document.getElementById("log-scale").addEventListener("change", drawLoss);
  drawLoss();
  chart(document.getElementById("lr-chart"), [
    { name: "schedule", colour: "#bbb", points: data.schedule, width: 1 },
    { name: "learning rate used", colour: colours.lr, points: steps.map((s) => [s.iter, s.lr]), width: 2 },
  ], "iteration", "learning rate", false);
  chart(document.getElementById("speed-chart"), [
    { name: "tokens/s", colour: colours.speed, points: steps.map((s) => [s.iter, s.tokens_per_s]), width: 1 },
  ], "iteration", "tokens per second", false);

  const last = evals[evals.length - 1];
  const mean = steps.length ? steps.reduce((a, s) => a + s.tokens_per_s, 0) / steps.length : 0;
  document.getElementById("summary").textContent = steps.length + " steps recorded" +
    (last ? "; at iteration " + last.iter + " train loss " + last.train.toFixed(4) + ", validation loss " + last.val.toFixed(4) : "") +
    (steps.length ? "; " + Math.round(mean) + " tokens/s on average" : "") + ". Written " + data.written + ".";
  document.getElementById("sample").textContent = data.sample;
  document.getElementById("sample-note").textContent = data.sample_note;
  const table = document.getElementById("configuration");
  for (const [name, value] of data.configuration) {
    const row = table.insertRow();
    row.insertCell().textContent = name;
    row.insertCell().textContent = value;
  }

  // Test mode (#selftest): the log toggle redraws; the report says what it checked.
  if (location.hash === "#selftest") {
    const results = [];
    const check = (ok, what) => results.push((ok ? "ok: " : "FAIL: ") + what);
    const lossSvg = document.getElementById("loss-chart");
    const names = Array.from(lossSvg.querySelectorAll("path.series"), (p) => p.dataset.name);
    check(names.length === 3, "three loss series drawn (" + names.join(", ") + ")");
    check(lossSvg.textContent.includes("cross-entropy loss (nats)"), "the y axis is labelled");
    const toggle = document.getElementById("log-scale");
    toggle.click();
    check(lossSvg.textContent.includes("(log scale)"), "the toggle switches to a log scale");
    toggle.click();
    check(!lossSvg.textContent.includes("(log scale)"), "and back");
    check(document.querySelectorAll("#configuration tr").length === data.configuration.length, "the configuration is listed");
    const report = document.createElement("pre");
    report.id = "selftest";
    const failed = results.filter((r) => r.startsWith("FAIL")).length;
    report.dataset.status = failed === 0 ? "pass" : "fail";
    report.textContent = "selftest: " + (failed === 0 ? "pass" : "fail") + ", " + results.length + " checks\n" + results.join("\n");
    document.body.appendChild(report);
  }
})();
