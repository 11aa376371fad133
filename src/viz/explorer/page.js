// attn's attention explorer: every head as a small heat map, one head opened as a head view
// (lines from each query to its keys, opacity = weight) and as a large heat map. Everything
// it shows is in the page: no network, works from a file:// URL.
(function () {
  "use strict";

  const data = JSON.parse(document.getElementById("attn-data").textContent);
  const [LAYERS, HEADS, TQ, TK] = data.shape;
  const weights = decodeFloat32(data.weights);
  const keyTokens = data.tokens;
  const queryTokens = keyTokens.slice(TK - TQ); // queries are the last TQ positions
  const state = { layer: 0, head: 0, query: -1, key: -1, scale: "row" };

  function decodeFloat32(base64) {
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    return new Float32Array(bytes.buffer);
  }

  function weight(l, h, i, j) {
    return weights[((l * HEADS + h) * TQ + i) * TK + j];
  }

  // The colour of weight v in row i of head (l, h) under the chosen scale.
  function headMax(l, h) {
    let m = 0;
    for (let i = 0; i < TQ; i++) for (let j = 0; j < TK; j++) m = Math.max(m, weight(l, h, i, j));
    return m;
  }
  function rowMax(l, h, i) {
    let m = 0;
    for (let j = 0; j < TK; j++) m = Math.max(m, weight(l, h, i, j));
    return m;
  }
  function level(v, top) {
    const t = top > 0 ? Math.min(Math.max(v / top, 0), 1) : 0;
    return Math.round(t * 255);
  }
  const rgb = data.colormap.map((hex) => [1, 3, 5].map((k) => parseInt(hex.substr(k, 2), 16)));

  // Paints head (l, h) on a canvas, `cell` pixels a weight; with factor f > 1, one cell per
  // f × f block, showing its largest weight (a thin diagonal stays visible). Pixels are written
  // straight into an ImageData: a long sequence has a million cells.
  function paintHead(canvas, l, h, cell, factor) {
    const f = factor || 1, rows = Math.ceil(TQ / f), cols = Math.ceil(TK / f);
    const width = cols * cell;
    canvas.width = width;
    canvas.height = rows * cell;
    const g = canvas.getContext("2d");
    const image = g.createImageData(width, rows * cell);
    const top = headMax(l, h);
    for (let r = 0; r < rows; r++) {
      let scaleTop = top;
      if (state.scale === "row") {
        scaleTop = 0;
        for (let i = r * f; i < Math.min(TQ, (r + 1) * f); i++) scaleTop = Math.max(scaleTop, rowMax(l, h, i));
      }
      for (let c = 0; c < cols; c++) {
        let v = 0;
        for (let i = r * f; i < Math.min(TQ, (r + 1) * f); i++) {
          for (let j = c * f; j < Math.min(TK, (c + 1) * f); j++) v = Math.max(v, weight(l, h, i, j));
        }
        const [red, green, blue] = rgb[level(v, scaleTop)];
        for (let y = r * cell; y < (r + 1) * cell; y++) {
          for (let x = c * cell; x < (c + 1) * cell; x++) {
            const p = 4 * (y * width + x);
            image.data[p] = red;
            image.data[p + 1] = green;
            image.data[p + 2] = blue;
            image.data[p + 3] = 255;
          }
        }
      }
    }
    g.putImageData(image, 0, 0);
    return g;
  }

  // ---- the grid of every head ----
  const grid = document.getElementById("grid");
  // Thumbnails of at most ~96 pixels a side: longer sequences are down-sampled.
  const thumbFactor = Math.max(1, Math.ceil(Math.max(TQ, TK) / 96));
  const thumbCell = Math.max(1, Math.floor(96 / Math.ceil(Math.max(TQ, TK) / thumbFactor)));
  function buildGrid() {
    grid.style.gridTemplateColumns = "auto repeat(" + HEADS + ", auto)";
    for (let l = 0; l < LAYERS; l++) {
      const label = document.createElement("div");
      label.className = "row-label";
      label.textContent = data.layer_name + " " + l;
      grid.appendChild(label);
      for (let h = 0; h < HEADS; h++) {
        const panel = document.createElement("div");
        panel.className = "panel";
        panel.dataset.layer = l;
        panel.dataset.head = h;
        panel.title = data.layer_name + " " + l + ", head " + h;
        panel.appendChild(document.createElement("canvas"));
        const caption = document.createElement("div");
        caption.textContent = "head " + h;
        panel.appendChild(caption);
        panel.addEventListener("click", () => select(l, h));
        grid.appendChild(panel);
      }
    }
  }
  function paintGrid() {
    for (const panel of grid.querySelectorAll(".panel")) {
      paintHead(panel.querySelector("canvas"), +panel.dataset.layer, +panel.dataset.head, thumbCell, thumbFactor);
    }
  }

  // ---- the head view ----
  const svgNS = "http://www.w3.org/2000/svg";
  const view = document.getElementById("head-view");
  const rowHeight = 18, columnGap = 220;
  const longest = Math.max(...keyTokens.map((t) => t.length), 1);
  const textWidth = Math.min(longest, 16) * 7.5 + 8;
  // All T² lines when there are few enough to draw; otherwise only the pointed-at token's.
  const dense = TQ * TK <= 128 * 128;
  const lines = new Map(); // i · TK + j -> the line from query i to key j
  const lineLayer = document.createElementNS(svgNS, "g");
  const y = (k) => 4 + k * rowHeight + rowHeight / 2;
  function addLine(i, j) {
    const line = document.createElementNS(svgNS, "line");
    line.setAttribute("x1", textWidth + 4);
    line.setAttribute("y1", y(i + TK - TQ));
    line.setAttribute("x2", textWidth + columnGap - 4);
    line.setAttribute("y2", y(j));
    line.setAttribute("stroke-width", 2);
    lineLayer.appendChild(line);
    lines.set(i * TK + j, line);
  }
  function buildHeadView() {
    const width = 2 * textWidth + columnGap, height = Math.max(TQ, TK) * rowHeight + 8;
    view.setAttribute("width", width);
    view.setAttribute("height", height);
    view.setAttribute("viewBox", "0 0 " + width + " " + height);
    view.appendChild(lineLayer);
    if (dense) {
      for (let i = 0; i < TQ; i++) for (let j = 0; j < TK; j++) addLine(i, j);
    } else {
      document.getElementById("head-view-note").textContent =
        "(" + TQ * TK + " lines are too many to draw at once: point at a token to see its lines)";
    }
    const addToken = (text, x, yy, anchor, cls, index) => {
      const t = document.createElementNS(svgNS, "text");
      t.setAttribute("x", x);
      t.setAttribute("y", yy + 4);
      t.setAttribute("text-anchor", anchor);
      t.setAttribute("class", cls);
      t.dataset.index = index;
      t.textContent = text;
      view.appendChild(t);
      return t;
    };
    queryTokens.forEach((tok, i) => {
      const t = addToken(tok, textWidth, y(i + TK - TQ), "end", "query", i);
      t.addEventListener("mouseenter", () => focus(i, -1));
      t.addEventListener("mouseleave", () => focus(-1, -1));
    });
    keyTokens.forEach((tok, j) => {
      const t = addToken(tok, textWidth + columnGap, y(j), "start", "key", j);
      t.addEventListener("mouseenter", () => focus(-1, j));
      t.addEventListener("mouseleave", () => focus(-1, -1));
    });
  }
  // Line opacity = weight; while a query (key) is pointed at, only its row (column) shows.
  function paintHeadView() {
    const { layer: l, head: h, query, key } = state;
    if (!dense) {
      lineLayer.replaceChildren();
      lines.clear();
      if (query >= 0) for (let j = 0; j < TK; j++) addLine(query, j);
      if (key >= 0) for (let i = 0; i < TQ; i++) addLine(i, key);
    }
    for (const [index, line] of lines) {
      const i = Math.floor(index / TK), j = index % TK;
      const shown = (query < 0 || query === i) && (key < 0 || key === j);
      const w = weight(l, h, i, j);
      line.setAttribute("stroke-opacity", shown ? w.toFixed(4) : 0);
      line.classList.toggle("highlighted", shown && (query >= 0 || key >= 0) && w > 0);
    }
    for (const t of view.querySelectorAll("text")) {
      const active = t.classList.contains("query") ? +t.dataset.index === query : +t.dataset.index === key;
      t.classList.toggle("active", active);
    }
  }

  // ---- the large heat map and the readout ----
  const matrix = document.getElementById("matrix");
  const matrixCell = Math.max(2, Math.min(24, Math.floor(480 / Math.max(TQ, TK))));
  const readout = document.getElementById("readout");
  function paintMatrix() {
    const g = paintHead(matrix, state.layer, state.head, matrixCell);
    if (state.query >= 0) {
      g.strokeStyle = "#d62728";
      g.lineWidth = 2;
      g.strokeRect(1, state.query * matrixCell + 1, TK * matrixCell - 2, matrixCell - 2);
    }
    if (state.key >= 0) {
      g.strokeStyle = "#d62728";
      g.lineWidth = 2;
      g.strokeRect(state.key * matrixCell + 1, 1, matrixCell - 2, TQ * matrixCell - 2);
    }
  }
  function describe(i, j) {
    const w = weight(state.layer, state.head, i, j);
    return "query " + (i + TK - TQ) + " " + JSON.stringify(queryTokens[i]) + " → key " + j + " " +
      JSON.stringify(keyTokens[j]) + ": " + w.toFixed(4);
  }
  matrix.addEventListener("mousemove", (e) => {
    const box = matrix.getBoundingClientRect();
    const j = Math.floor((e.clientX - box.left) / matrixCell), i = Math.floor((e.clientY - box.top) / matrixCell);
    if (i < 0 || i >= TQ || j < 0 || j >= TK) return;
    readout.textContent = describe(i, j);
    if (state.query !== i) focus(i, -1, true);
  });
  matrix.addEventListener("mouseleave", () => focus(-1, -1));

  function paintLegend() {
    const bar = document.getElementById("legend-bar");
    const g = bar.getContext("2d");
    for (let x = 0; x < bar.width; x++) {
      g.fillStyle = data.colormap[Math.round((x / (bar.width - 1)) * 255)];
      g.fillRect(x, 0, 1, bar.height);
    }
    document.getElementById("legend-max").textContent =
      state.scale === "row" ? "the row's largest" : headMax(state.layer, state.head).toFixed(3);
  }

  // ---- state changes ----
  function focus(query, key, keepReadout) {
    state.query = query;
    state.key = key;
    if (!keepReadout) {
      if (query >= 0) {
        let best = 0;
        for (let j = 1; j < TK; j++) if (weight(state.layer, state.head, query, j) > weight(state.layer, state.head, query, best)) best = j;
        readout.textContent = "query " + (query + TK - TQ) + " " + JSON.stringify(queryTokens[query]) +
          " attends most to key " + best + " " + JSON.stringify(keyTokens[best]) + " (" +
          weight(state.layer, state.head, query, best).toFixed(4) + ")";
      } else if (key >= 0) {
        let total = 0;
        for (let i = 0; i < TQ; i++) total += weight(state.layer, state.head, i, key);
        readout.textContent = "key " + key + " " + JSON.stringify(keyTokens[key]) +
          " receives " + total.toFixed(4) + " in all from " + TQ + " queries";
      } else {
        readout.textContent = "\u00a0";
      }
    }
    paintHeadView();
    paintMatrix();
  }
  function select(l, h) {
    state.layer = (l + LAYERS) % LAYERS;
    state.head = (h + HEADS) % HEADS;
    for (const panel of grid.querySelectorAll(".panel")) {
      panel.classList.toggle("selected", +panel.dataset.layer === state.layer && +panel.dataset.head === state.head);
    }
    document.getElementById("head-title").textContent =
      data.layer_name + " " + state.layer + " · head " + state.head;
    paintLegend();
    focus(-1, -1);
  }
  document.addEventListener("keydown", (e) => {
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    if (!(e.key in moves) || e.target.tagName === "SELECT") return;
    e.preventDefault();
    select(state.layer + moves[e.key][0], state.head + moves[e.key][1]);
  });
  document.getElementById("scale").addEventListener("change", (e) => {
    state.scale = e.target.value;
    paintGrid();
    select(state.layer, state.head);
  });

  buildGrid();
  buildHeadView();
  paintGrid();
  select(0, 0);

  // ---- test mode (#selftest): the page drives itself as a person would and reports ----
  if (location.hash === "#selftest") {
    const results = [];
    const check = (ok, what) => results.push((ok ? "ok: " : "FAIL: ") + what);
    const panels = grid.querySelectorAll(".panel");
    check(panels.length === LAYERS * HEADS, panels.length + " panels for " + LAYERS + " x " + HEADS + " heads");
    panels[panels.length - 1].dispatchEvent(new MouseEvent("click", { bubbles: true }));
    check(state.layer === LAYERS - 1 && state.head === HEADS - 1, "a click opens the last head");
    check(document.getElementById("head-title").textContent === data.layer_name + " " + (LAYERS - 1) + " · head " + (HEADS - 1),
      "the title names the opened head");
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight" }));
    check(state.head === 0 && state.layer === LAYERS - 1, "→ wraps to head 0");
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown" }));
    check(state.layer === 0, "↓ wraps to layer 0");
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowUp" }));
    check(state.layer === LAYERS - 1, "↑ goes back");
    const queryText = view.querySelectorAll("text.query"), keyText = view.querySelectorAll("text.key");
    check(queryText.length === TQ && keyText.length === TK, "the head view lists " + TQ + " queries and " + TK + " keys");
    check(Array.from(keyText).every((t, j) => t.textContent === keyTokens[j]), "key labels are the tokens");
    const last = TQ - 1;
    queryText[last].dispatchEvent(new MouseEvent("mouseenter"));
    let visible = 0, expected = 0;
    for (let j = 0; j < TK; j++) if (weight(state.layer, state.head, last, j) > 0) expected++;
    for (const line of lines.values()) if (line.classList.contains("highlighted")) visible++;
    check(visible === expected && visible > 0, "hovering the last query highlights its " + expected + " lines (" + visible + ")");
    check(queryText[last].classList.contains("active"), "the hovered token is marked");
    check(readout.textContent.includes("attends most to"), "the readout names its strongest key");
    queryText[last].dispatchEvent(new MouseEvent("mouseleave"));
    const box = matrix.getBoundingClientRect();
    matrix.dispatchEvent(new MouseEvent("mousemove", {
      clientX: box.left + 0.5 * matrixCell, clientY: box.top + (last + 0.5) * matrixCell }));
    const w = weight(state.layer, state.head, last, 0).toFixed(4);
    check(readout.textContent.endsWith(": " + w), "the weight under the pointer is shown (" + readout.textContent + ")");
    const report = document.createElement("pre");
    report.id = "selftest";
    const failed = results.filter((r) => r.startsWith("FAIL")).length;
    report.dataset.status = failed === 0 ? "pass" : "fail";
    // Where each small heat map is, for a test that then looks at a screenshot.
    report.dataset.panels = JSON.stringify(Array.from(panels, (p) => {
      const r = p.querySelector("canvas").getBoundingClientRect();
      return [+p.dataset.layer, +p.dataset.head, r.left + scrollX, r.top + scrollY, r.width, r.height];
    }));
    report.textContent = "selftest: " + (failed === 0 ? "pass" : "fail") + ", " + results.length + " checks\n" + results.join("\n");
    document.body.appendChild(report);
  }
})();
