// Times the npm package tiktoken (the WASM build of tiktoken's Rust core) encoding a file with
// GPT-2's ranks, in process: prints "tokens MB/s" of the fastest of ROUNDS runs (after one
// warm-up). Used by bench/compare_gpt2_tokenizer.sh.
//   node bench/tiktoken_encode.mjs NODE_MODULES_DIR FILE ROUNDS
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [modules, file, rounds] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modules), 'x.js'));
const { get_encoding } = require('tiktoken');
const enc = get_encoding('gpt2');
const text = fs.readFileSync(file, 'utf8');
const bytes = Buffer.byteLength(text);
let tokens = enc.encode(text, 'all').length;  // the warm-up
let best = Infinity;
for (let r = 0; r < Number(rounds); ++r) {
  const start = process.hrtime.bigint();
  tokens = enc.encode(text, 'all').length;
  best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
}
enc.free();
console.log(`${tokens} ${(bytes / best / 1e6).toFixed(2)}`);
