// Imports a Chrome trace-event JSON file with Chrome DevTools' own trace
// engine (the Performance panel's, published on npm as
// @paulirish/trace_engine) and prints what its FlowsHandler made of the
// flow events: {"flows": N, "arrows": M, "events": K}. A flow counts when
// its phase events bound to at least two slices (DevTools drops the rest).
//
// usage: node devtools_flows.mjs DIR FILE   (DIR holds node_modules/)
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [dir, file] = process.argv.slice(2);
if (!dir || !file) {
  console.error('usage: node devtools_flows.mjs DIR FILE');
  process.exit(2);
}
const base = path.join(dir, 'node_modules/@paulirish/trace_engine');
const {polyfillDOMRect} = await import(pathToFileURL(path.join(base, 'analyze-trace.mjs')).href);
polyfillDOMRect();
const Trace = await import(pathToFileURL(path.join(base, 'models/trace/trace.js')).href);
const json = JSON.parse(fs.readFileSync(file, 'utf8'));
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(json.traceEvents);
const parsed = model.parsedTrace();
const flows = (parsed.data ?? parsed).Flows.flows;
let arrows = 0;
for (const f of flows) arrows += f.length - 1;
console.log(JSON.stringify({flows: flows.length, arrows, events: json.traceEvents.length}));
