#!/usr/bin/env node
// Run an ONNX model on ONNX Runtime's CPU execution provider (onnxruntime-node,
// installed by scripts/fetch-onnx-models.sh) and dump its outputs as .npy files.
// This is the reference side of etc's ONNX importer tests. See test/onnx/README.md.
//
//   node test/onnx/ort_run.mjs MODEL.onnx --output-dir DIR
//        [--input NAME=FILE.npy]... [--seed N] [--input-shape NAME=AxBxC]...
//        [--warmup N] [--iterations N] [--threads N]
//        [--graph-opt disabled|basic|extended|all] [--npm-dir DIR]
//
// stdout: exactly one JSON line (see README); diagnostics go to stderr.
// Exit status: 0 ok, 2 bad arguments / inputs, 1 runtime failure.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const USAGE = `usage: node test/onnx/ort_run.mjs MODEL.onnx --output-dir DIR
       [--input NAME=FILE.npy]... [--seed N] [--input-shape NAME=AxBxC]...
       [--warmup N] [--iterations N] [--threads N]
       [--graph-opt disabled|basic|extended|all] [--npm-dir DIR]
  Inputs without --input get deterministic uniform [-1,1) random data from --seed
  (default 0); symbolic dims need --input-shape. onnxruntime-node is loaded from
  --npm-dir, else $ETC_ONNX_NPM, else \${ETC_CACHE_DIR:-$HOME/.cache/etc}/onnx-npm.`;

class UsageError extends Error {}
const die = (msg, code = 2, showUsage = false) => {
  process.stderr.write(`ort_run: error: ${msg}\n`);
  if (showUsage) process.stderr.write(`${USAGE}\n`);
  process.exit(code);
};

// ---------------------------------------------------------------- arguments
function parseIntArg(flag, v, min) {
  if (v === undefined) throw new UsageError(`${flag} needs a value`);
  if (!/^\d+$/.test(v)) throw new UsageError(`${flag} expects a non-negative integer, got '${v}'`);
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`${flag} must be an integer >= ${min}, got '${v}'`);
  return n;
}
function parseShape(flag, s) {
  if (s === '' || s === 'scalar') return [];
  if (!/^\d+(x\d+)*$/.test(s)) throw new UsageError(`${flag}: bad shape '${s}' (expected e.g. 1x3x48x192)`);
  return s.split('x').map(Number);
}
function splitNameValue(flag, v) {
  if (v === undefined) throw new UsageError(`${flag} needs a value NAME=VALUE`);
  const k = v.lastIndexOf('=');
  if (k <= 0) throw new UsageError(`${flag} expects NAME=VALUE, got '${v}'`);
  return [v.slice(0, k), v.slice(k + 1)];
}
function parseArgs(argv) {
  const a = { model: null, inputs: new Map(), shapes: new Map(), seed: 0, outDir: null, warmup: 1, iterations: 10, threads: 1, graphOpt: 'all', npmDir: null };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    let flag = arg, val, inline = false;
    if (arg.startsWith('--') && arg.includes('=')) {
      // --flag=value (for --input/--input-shape: --input=NAME=FILE)
      const k = arg.indexOf('=');
      flag = arg.slice(0, k); val = arg.slice(k + 1); inline = true;
    }
    const next = () => { if (inline) return val; i++; if (i >= argv.length) throw new UsageError(`${flag} needs a value`); return argv[i]; };
    switch (flag) {
      case '-h': case '--help': process.stdout.write(`${USAGE}\n`); process.exit(0); break;
      case '--input': { const [n, f] = splitNameValue(flag, next()); if (a.inputs.has(n)) throw new UsageError(`--input ${n} given twice`); a.inputs.set(n, f); break; }
      case '--input-shape': { const [n, s] = splitNameValue(flag, next()); if (a.shapes.has(n)) throw new UsageError(`--input-shape ${n} given twice`); a.shapes.set(n, parseShape(`--input-shape ${n}`, s)); break; }
      case '--seed': a.seed = parseIntArg(flag, next(), 0); if (a.seed > 0xffffffff) throw new UsageError('--seed must fit in 32 bits'); break;
      case '--output-dir': a.outDir = next(); break;
      case '--warmup': a.warmup = parseIntArg(flag, next(), 0); break;
      case '--iterations': a.iterations = parseIntArg(flag, next(), 1); break;
      case '--threads': a.threads = parseIntArg(flag, next(), 1); break;
      case '--graph-opt': a.graphOpt = next(); if (!['disabled', 'basic', 'extended', 'all'].includes(a.graphOpt)) throw new UsageError(`--graph-opt must be disabled|basic|extended|all, got '${a.graphOpt}'`); break;
      case '--npm-dir': a.npmDir = next(); break;
      default:
        if (arg.startsWith('-')) throw new UsageError(`unknown option '${arg}'`);
        if (a.model) throw new UsageError(`more than one model given ('${a.model}', '${arg}')`);
        a.model = arg;
    }
  }
  if (!a.model) throw new UsageError('no MODEL.onnx given');
  if (!a.outDir) throw new UsageError('--output-dir is required');
  return a;
}

// ---------------------------------------------------------------- dtypes
// ORT tensor type <-> numpy descr <-> typed array
const DTYPES = {
  float32: { descr: '<f4', size: 4, Arr: Float32Array },
  float64: { descr: '<f8', size: 8, Arr: Float64Array },
  float16: { descr: '<f2', size: 2, Arr: Uint16Array },
  int8: { descr: '|i1', size: 1, Arr: Int8Array },
  uint8: { descr: '|u1', size: 1, Arr: Uint8Array },
  int16: { descr: '<i2', size: 2, Arr: Int16Array },
  uint16: { descr: '<u2', size: 2, Arr: Uint16Array },
  int32: { descr: '<i4', size: 4, Arr: Int32Array },
  uint32: { descr: '<u4', size: 4, Arr: Uint32Array },
  int64: { descr: '<i8', size: 8, Arr: BigInt64Array },
  uint64: { descr: '<u8', size: 8, Arr: BigUint64Array },
  bool: { descr: '|b1', size: 1, Arr: Uint8Array },
};
// numpy descr (without byte-order char) -> ORT type
const FROM_NPY = { f4: 'float32', f8: 'float64', f2: 'float16', i1: 'int8', u1: 'uint8', i2: 'int16', u2: 'uint16', i4: 'int32', u4: 'uint32', i8: 'int64', u8: 'uint64', b1: 'bool', '?': 'bool' };

// ---------------------------------------------------------------- npy I/O
function parseNpyHeaderDict(h, file) {
  // e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 48, 192), }
  const descr = /['"]descr['"]\s*:\s*['"]([^'"]+)['"]/.exec(h);
  const fo = /['"]fortran_order['"]\s*:\s*(True|False)/.exec(h);
  const sh = /['"]shape['"]\s*:\s*\(([^)]*)\)/.exec(h);
  if (!descr || !fo || !sh) throw new Error(`${file}: cannot parse npy header ${JSON.stringify(h.trim())}`);
  const shape = sh[1].split(',').map((s) => s.trim()).filter((s) => s !== '').map((s) => {
    const n = Number(s.replace(/L$/, ''));
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${file}: bad dimension '${s}' in npy shape`);
    return n;
  });
  return { descr: descr[1], fortran: fo[1] === 'True', shape };
}
export function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf[0] !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not an .npy file (bad magic)`);
  const major = buf[6];
  let hlen, hstart;
  if (major === 1) { hlen = buf.readUInt16LE(8); hstart = 10; }
  else if (major === 2 || major === 3) { if (buf.length < 12) throw new Error(`${file}: truncated npy header`); hlen = buf.readUInt32LE(8); hstart = 12; }
  else throw new Error(`${file}: unsupported npy format version ${major}.${buf[7]}`);
  if (hstart + hlen > buf.length) throw new Error(`${file}: truncated npy header`);
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', hstart, hstart + hlen);
  const { descr, fortran, shape } = parseNpyHeaderDict(header, file);
  if (fortran) throw new Error(`${file}: fortran_order=True is not supported (save with np.ascontiguousarray)`);
  let order = descr[0], code = descr.slice(1);
  if (!'<>|='.includes(order)) { order = '|'; code = descr; }
  const type = FROM_NPY[code];
  if (!type) throw new Error(`${file}: unsupported npy dtype '${descr}'`);
  const { size, Arr } = DTYPES[type];
  const n = shape.reduce((x, y) => x * y, 1);
  const start = hstart + hlen;
  if (buf.length - start !== n * size) throw new Error(`${file}: data size ${buf.length - start} bytes does not match shape [${shape}] of ${descr} (${n * size} bytes)`);
  const bytes = new Uint8Array(n * size);
  bytes.set(buf.subarray(start, start + n * size));
  if (order === '>' && size > 1) for (let i = 0; i < bytes.length; i += size) bytes.subarray(i, i + size).reverse();
  if (os.endianness() !== 'LE') throw new Error('big-endian hosts are not supported');
  return { type, shape, data: new Arr(bytes.buffer, 0, n) };
}
export function writeNpy(file, type, shape, data) {
  const dt = DTYPES[type];
  if (!dt) throw new Error(`cannot write tensor of type '${type}' to npy`);
  const shapeStr = shape.length === 0 ? '()' : shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '${dt.descr}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  let major = 1, pre = 10;
  if (dict.length + 1 + pre > 0xffff) { major = 2; pre = 12; }
  const total = Math.ceil((pre + dict.length + 1) / 64) * 64; // numpy aligns to 64 bytes
  dict = dict + ' '.repeat(total - pre - dict.length - 1) + '\n';
  const head = Buffer.alloc(pre);
  head[0] = 0x93; head.write('NUMPY', 1, 'latin1'); head[6] = major; head[7] = 0;
  if (major === 1) head.writeUInt16LE(dict.length, 8); else head.writeUInt32LE(dict.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(dict, 'latin1'), body]));
}

// ---------------------------------------------------------------- random inputs
// mulberry32, one stream per input, seeded from (seed, index of the input in the
// model's input list). Each float32 is (r >>> 8) * 2^-23 - 1: exactly
// representable, uniform in [-1, 1).
function mulberry32(a) {
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
}
function randomTensorData(type, n, seed, index) {
  const rnd = mulberry32((seed ^ Math.imul(index + 1, 0x9e3779b9)) >>> 0);
  if (type === 'float32' || type === 'float64') {
    const out = new DTYPES[type].Arr(n);
    for (let i = 0; i < n; i++) out[i] = (rnd() >>> 8) * 2 ** -23 - 1;
    return out;
  }
  return null;
}

// ---------------------------------------------------------------- ort loading
function loadOrt(npmDirArg) {
  const base = npmDirArg || process.env.ETC_ONNX_NPM || path.join(process.env.ETC_CACHE_DIR || path.join(os.homedir(), '.cache', 'etc'), 'onnx-npm');
  const root = path.basename(base) === 'node_modules' ? path.dirname(base) : base;
  const where = npmDirArg ? '--npm-dir' : process.env.ETC_ONNX_NPM ? '$ETC_ONNX_NPM' : 'default cache';
  if (!fs.existsSync(path.join(root, 'node_modules', 'onnxruntime-node', 'package.json')))
    die(`onnxruntime-node not found under ${root}/node_modules (from ${where}); run scripts/fetch-onnx-models.sh first and pass its output via --npm-dir or ETC_ONNX_NPM`, 1);
  const req = createRequire(path.join(root, 'package.json'));
  try {
    return { ort: req('onnxruntime-node'), version: req('onnxruntime-node/package.json').version, root };
  } catch (e) {
    die(`failed to load onnxruntime-node from ${root}: ${e.message}`, 1);
  }
}

// ---------------------------------------------------------------- main
const sanitize = (name) => name.replace(/[^A-Za-z0-9._-]/g, '_');
const fmtShape = (s) => `[${s.join(',')}]`;

async function main() {
  let args;
  try { args = parseArgs(process.argv.slice(2)); } catch (e) { if (e instanceof UsageError) die(e.message, 2, true); throw e; }
  if (!fs.existsSync(args.model)) die(`model file '${args.model}' does not exist`);
  const { ort, version } = loadOrt(args.npmDir);
  ort.env.logLevel = 'error';

  let session;
  try {
    session = await ort.InferenceSession.create(args.model, {
      executionProviders: ['cpu'],
      intraOpNumThreads: args.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: args.graphOpt,
      logSeverityLevel: 3,
    });
  } catch (e) {
    die(`onnxruntime failed to load '${args.model}': ${e.message}`, 1);
  }

  const inMeta = session.inputMetadata;
  const names = new Set(inMeta.map((m) => m.name));
  for (const n of [...args.inputs.keys(), ...args.shapes.keys()])
    if (!names.has(n)) die(`model has no input named '${n}' (inputs: ${[...names].map((x) => JSON.stringify(x)).join(', ')})`);
  for (const n of args.shapes.keys()) if (args.inputs.has(n)) die(`input '${n}' has both --input and --input-shape; the .npy file defines the shape`);

  fs.mkdirSync(args.outDir, { recursive: true });
  const feeds = {};
  const inputsInfo = [];
  const usedFiles = new Map();
  for (let idx = 0; idx < inMeta.length; idx++) {
    const m = inMeta[idx];
    if (!m.isTensor) die(`input '${m.name}' is not a tensor; not supported`, 1);
    const dims = m.shape || [];
    const matches = (shape) => shape.length === dims.length && dims.every((d, k) => typeof d !== 'number' || d < 0 || d === shape[k]);
    if (args.inputs.has(m.name)) {
      const file = args.inputs.get(m.name);
      let t;
      try { t = readNpy(file); } catch (e) { die(`--input ${m.name}: ${e.message}`); }
      if (t.type !== m.type) die(`--input ${m.name}: ${file} holds ${t.type} but the model input is ${m.type}`);
      if (!matches(t.shape)) die(`--input ${m.name}: ${file} has shape ${fmtShape(t.shape)}, model expects ${fmtShape(dims)}`);
      feeds[m.name] = new ort.Tensor(m.type, t.data, t.shape);
      inputsInfo.push({ name: m.name, shape: t.shape, dtype: m.type, source: 'file', file: path.resolve(file) });
      continue;
    }
    let shape;
    if (args.shapes.has(m.name)) {
      shape = args.shapes.get(m.name);
      if (!matches(shape)) die(`--input-shape ${m.name}=${shape.join('x')} does not fit the model's input shape ${fmtShape(dims)}`);
    } else {
      if (dims.some((d) => typeof d !== 'number' || d < 0))
        die(`input '${m.name}' has symbolic shape ${fmtShape(dims)}; give --input-shape ${m.name}=${dims.map((d) => (typeof d === 'number' && d >= 0 ? d : 'N')).join('x')} or --input ${m.name}=FILE.npy`);
      shape = dims.slice();
    }
    const n = shape.reduce((x, y) => x * y, 1);
    const data = randomTensorData(m.type, n, args.seed, idx);
    if (!data) die(`input '${m.name}' is ${m.type}; random data is only generated for float32/float64, pass --input ${m.name}=FILE.npy`);
    let fname = `input_${sanitize(m.name)}.npy`;
    if (usedFiles.has(fname)) fname = `input_${idx}_${sanitize(m.name)}.npy`;
    usedFiles.set(fname, m.name);
    const file = path.join(args.outDir, fname);
    writeNpy(file, m.type, shape, data);
    feeds[m.name] = new ort.Tensor(m.type, data, shape);
    inputsInfo.push({ name: m.name, shape, dtype: m.type, source: 'random', seed: args.seed, file: path.resolve(file) });
  }

  let results;
  const times = [];
  try {
    for (let i = 0; i < args.warmup; i++) await session.run(feeds);
    for (let i = 0; i < args.iterations; i++) {
      const t0 = process.hrtime.bigint();
      results = await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  } catch (e) {
    die(`onnxruntime failed to run '${args.model}': ${e.message}`, 1);
  }

  const outputs = [];
  session.outputNames.forEach((name, i) => {
    const t = results[name];
    if (!t || !DTYPES[t.type]) die(`output '${name}' has unsupported type '${t && t.type}'`, 1);
    const shape = t.dims.map(Number);
    const file = path.join(args.outDir, `output_${i}.npy`);
    writeNpy(file, t.type, shape, t.data);
    outputs.push({ name, shape, dtype: t.type, file: path.resolve(file) });
  });
  if (typeof session.release === 'function') await session.release();

  const sorted = times.slice().sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const r3 = (x) => Math.round(x * 1000) / 1000;
  process.stdout.write(JSON.stringify({
    model: path.resolve(args.model),
    inputs: inputsInfo,
    outputs,
    latency_ms: { median: r3(median), min: r3(sorted[0]), mean: r3(times.reduce((x, y) => x + y, 0) / times.length), iterations: times.length, warmup: args.warmup },
    threads: args.threads,
    graph_opt: args.graphOpt,
    ort_version: version,
  }) + '\n');
}

// Importable (readNpy/writeNpy) without running main().
if (process.argv[1] && import.meta.url === pathToFileURL(fs.realpathSync(process.argv[1])).href)
  main().catch((e) => die(e && e.stack ? e.stack : String(e), 1));
