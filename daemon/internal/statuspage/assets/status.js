// The gclock status page: polls status.json (or each ?nodes=URL's) every
// second and draws the last ten minutes with uPlot. No other resource.
(function () {
  "use strict";
  const params = new URLSearchParams(location.search);
  const urls = (params.get("nodes") || "").split(",").map(s => s.trim()).filter(Boolean)
    .map(u => u.replace(/\/+$/, "") + "/status.json");
  if (urls.length === 0) urls.push("status.json");
  const every = Math.max(200, Number(params.get("every")) || 1000);
  const colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

  // Each chart: which columns of a node's JSON it draws, and their names.
  const charts = {
    offset: { unit: "µs", cols: j => [["offset", j.offset_change_us]] },
    drift: { unit: "ppm", cols: j => [["drift", j.drift_ppm_history]] },
    width: { unit: "µs", cols: j => [["width", j.width_us]] },
    periods: { unit: "s", cols: j => Object.keys(j.periods_s_history || {}).sort().map(k => [k, j.periods_s_history[k]]) },
  };
  const plots = {};
  let updates = 0;

  function fmtNs(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(3) + " µs";
    return ns + " ns";
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }

  function table(results) {
    const body = document.querySelector("#values tbody");
    body.textContent = "";
    for (const r of results) {
      const tr = document.createElement("tr");
      if (r.error) {
        cell(tr, r.url); cell(tr, "error", "status-error"); cell(tr, r.error);
        body.appendChild(tr);
        continue;
      }
      const j = r.json;
      cell(tr, "node " + j.node);
      if (j.served_status && j.served_status !== j.status) {
        // UTC served with another status than global time's (an
        // unsynchronised upstream): the served one is what clients get.
        cell(tr, "UTC " + j.served_status + (j.served_reason ? " (" + j.served_reason + ")" : "") +
          "; global time " + j.status, "status-" + j.served_status);
      } else {
        cell(tr, j.status, "status-" + j.status);
      }
      cell(tr, "node " + j.reference);
      cell(tr, j.offset);
      cell(tr, j.drift_ppm.toFixed(3) + " ppm");
      cell(tr, fmtNs(j.width_ns));
      cell(tr, fmtNs(j.last_offset_ns));
      cell(tr, fmtNs(j.rms_offset_ns));
      cell(tr, Object.keys(j.periods_s || {}).sort().map(k => k + " " + j.periods_s[k] + " s").join(", "));
      body.appendChild(tr);
    }
  }

  // draw makes or updates one chart from every node's columns.
  function draw(name, results) {
    const spec = charts[name];
    const tables = [], labels = [];
    for (const r of results) {
      if (r.error || r.json.t_unix_ms.length === 0) continue;
      const cols = spec.cols(r.json);
      if (cols.length === 0) continue;
      tables.push([r.json.t_unix_ms.map(ms => ms / 1000), ...cols.map(c => c[1])]);
      for (const c of cols) labels.push(results.length > 1 ? "node " + r.json.node + " " + c[0] : c[0]);
    }
    if (tables.length === 0) return;
    const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    const el = document.getElementById("chart-" + name);
    const key = labels.join("|");
    let p = plots[name];
    if (p && p.key !== key) { p.plot.destroy(); p = null; }
    if (!p) {
      const opts = {
        width: Math.max(320, el.clientWidth || 480), height: 220,
        scales: { x: { time: true } },
        axes: [{}, { label: spec.unit, size: 70 }],
        series: [{}].concat(labels.map((l, i) => ({ label: l, stroke: colors[i % colors.length], width: 1.5, spanGaps: true }))),
      };
      p = plots[name] = { key: key, plot: new uPlot(opts, data, el) };
    } else {
      p.plot.setData(data);
    }
  }

  // clusterLink offers, on one daemon's page, the view of every daemon of
  // its cluster (status?nodes=...), or the way back from it.
  function clusterLink(ok) {
    const el = document.getElementById("cluster");
    if (params.get("nodes")) {
      if (!el.firstChild) {
        const a = document.createElement("a");
        a.href = "status";
        a.textContent = "this daemon only";
        el.appendChild(a);
      }
      return;
    }
    const peers = ok.length ? ok[0].json.peer_pages || [] : [];
    if (peers.length < 2 || el.firstChild) return;
    const a = document.createElement("a");
    a.id = "cluster-link";
    a.href = "status?nodes=" + peers.map(p => encodeURIComponent(p.url)).join(",");
    a.textContent = "all " + peers.length + " nodes on one page";
    el.appendChild(a);
  }

  async function fetchOne(url) {
    try {
      const res = await fetch(url, { cache: "no-store" });
      if (!res.ok) throw new Error("HTTP " + res.status);
      return { url: url, json: await res.json() };
    } catch (e) {
      return { url: url, error: String(e.message || e) };
    }
  }

  async function refresh() {
    const results = await Promise.all(urls.map(fetchOne));
    table(results);
    for (const name of Object.keys(charts)) draw(name, results);
    const ok = results.filter(r => !r.error);
    const failed = results.length - ok.length;
    document.getElementById("error").textContent = failed ? failed + " of " + results.length + " daemons did not answer" : "";
    const when = ok.length ? new Date(Math.max(...ok.map(r => r.json.updated_unix_ms))).toISOString().replace("T", " ").replace("Z", " UTC") : "never";
    document.getElementById("summary").textContent = ok.length + " node" + (ok.length === 1 ? "" : "s") + ", last sample " + when;
    clusterLink(ok);
    updates++;
    document.body.dataset.updates = String(updates);
  }

  refresh();
  setInterval(refresh, every);
})();
