// warren's dashboard: the zones table (sort, filter), a zone's detail with live
// charts, actions, config, a browser terminal (xterm.js over the daemon's WebSocket),
// host memory by kind, doctor's table and the live event stream (SSE /1.0/events).
// Everything goes through the daemon's /1.0 API with the dashboard's cookie.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import "./style.css";

type Json = any;
const $ = (id: string) => document.getElementById(id)!;

async function api(method: string, path: string, body?: Json): Promise<Json> {
  const r = await fetch(path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  const v = text ? (() => { try { return JSON.parse(text); } catch { return text; } })() : null;
  if (!r.ok) throw new Error(v && v.message ? v.message : `${method} ${path}: ${r.status}`);
  return v;
}

function toast(msg: string, bad = false) {
  const t = $("toast");
  t.textContent = msg;
  t.className = bad ? "bad show" : "show";
  setTimeout(() => (t.className = ""), 5000);
}

const bytes = (n?: number | null) => {
  if (n == null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
};
const dur = (s?: number | null) => {
  if (s == null) return "–";
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  return d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s}s`;
};

// ---- state ----
interface Row { name: string; state: string; kind?: string; uptime_s?: number; cpu?: number; mem?: number; pids?: number; pids_max?: number; limits: string }
const rows = new Map<string, Row>();
const limits = new Map<string, string>();
let sortKey = "name", sortDesc = false, selected: string | null = null;
const history = new Map<string, { t: number[]; cpu: number[]; mem: number[]; pids: number[] }>();
const HISTORY = 60;


async function refreshZones() {
  const list: Json[] = await api("GET", "/1.0/zones");
  const seen = new Set<string>();
  for (const z of list) {
    seen.add(z.name);
    const r = rows.get(z.name) ?? ({ name: z.name, limits: "–" } as Row);
    r.state = z.state ?? "unknown"; r.kind = z.kind; r.uptime_s = z.uptime_s;
    rows.set(z.name, r);
    const l = z.config?.limits;
    if (l) limits.set(z.name, Object.entries(l).filter(([, v]) => v != null).map(([k, v]) => `${k}=${v}`).join(" ") || "none");
  }
  for (const k of [...rows.keys()]) if (!seen.has(k)) rows.delete(k);
  render();
}

async function refreshStat() {
  const s: Json = await api("GET", "/1.0/stat");
  const now = Date.now() / 1000;
  for (const z of s.zones ?? []) {
    const r = rows.get(z.name);
    if (!r) continue;
    r.cpu = z.cpu_pct ?? undefined; r.mem = z.memory?.charged_bytes ?? undefined;
    r.pids = z.tasks ?? z.processes ?? undefined; r.pids_max = z.pids_max ?? undefined;
    r.uptime_s = z.uptime_s ?? r.uptime_s; r.state = z.state ?? r.state;
    const h = history.get(z.name) ?? { t: [], cpu: [], mem: [], pids: [] };
    h.t.push(now); h.cpu.push(r.cpu ?? 0); h.mem.push((r.mem ?? 0) / 1048576); h.pids.push(r.pids ?? 0);
    if (h.t.length > HISTORY) { h.t.shift(); h.cpu.shift(); h.mem.shift(); h.pids.shift(); }
    history.set(z.name, h);
  }
  render();
  drawCharts();
}

function actionButtons(r: Row): HTMLElement[] {
  if (r.kind === "oci") return [];
  const b = (label: string, fn: () => Promise<void>) => {
    const e = document.createElement("button");
    e.textContent = label; e.dataset.action = label; e.dataset.zone = r.name;
    e.onclick = (ev) => { ev.stopPropagation(); fn().catch((x) => toast(String(x.message ?? x), true)); };
    return e;
  };
  const verb = (v: string) => async () => { await api("POST", `/1.0/zones/${r.name}/${v}`); toast(`${r.name}: ${v} done`); await refreshZones(); };
  const out = [];
  if (r.state === "running") out.push(b("halt", verb("halt")), b("reboot", verb("reboot")));
  else out.push(b("boot", verb("boot")));
  out.push(b("clone", async () => {
    const n = prompt(`clone ${r.name} as:`); if (!n) return;
    await api("POST", `/1.0/zones/${r.name}/clone`, { name: n }); toast(`${r.name} cloned as ${n}`); await refreshZones();
  }));
  out.push(b("delete", async () => {
    if (!confirm(`Delete zone ${r.name}? It is halted if running, and its root and config are removed.`)) return;
    await api("DELETE", `/1.0/zones/${r.name}?force=true`); toast(`${r.name} deleted`);
    if (selected === r.name) { selected = null; $("detail").hidden = true; }
    await refreshZones();
  }));
  return out;
}

function render() {
  const f = ($("filter") as HTMLInputElement).value.trim().toLowerCase();
  const key = (r: Row): any => ({ name: r.name, state: r.state, limits: r.limits, cpu: r.cpu ?? -1, mem: r.mem ?? -1, pids: r.pids ?? -1, uptime: r.uptime_s ?? -1 } as any)[sortKey];
  const list = [...rows.values()].filter((r) => !f || r.name.toLowerCase().includes(f) || r.state.includes(f))
    .sort((a, b) => { const x = key(a), y = key(b); const c = x < y ? -1 : x > y ? 1 : 0; return sortDesc ? -c : c; });
  const tb = $("zones").querySelector("tbody")!;
  tb.replaceChildren(...list.map((r) => {
    r.limits = limits.get(r.name) ?? "–";
    const tr = document.createElement("tr");
    tr.dataset.zone = r.name;
    if (r.name === selected) tr.className = "sel";
    const up = r.state === "running";
    const cells = [r.name, r.state, r.limits, !up || r.cpu == null ? "–" : r.cpu.toFixed(1), up ? bytes(r.mem) : "–",
      !up || r.pids == null ? "–" : `${r.pids}${r.pids_max ? " / " + r.pids_max : ""}`, up ? dur(r.uptime_s) : "–"];
    cells.forEach((c, i) => { const td = document.createElement("td"); td.textContent = c; if (i === 1) td.className = `state state-${r.state}`; tr.append(td); });
    const td = document.createElement("td"); td.append(...actionButtons(r)); tr.append(td);
    tr.onclick = () => select(r.name);
    return tr;
  }));
  $("count").textContent = `${list.length} of ${rows.size} zones`;
  if (selected) {
    const r = rows.get(selected);
    if (r) { $("detail-name").textContent = `${r.name} — ${r.state}`; $("detail-actions").replaceChildren(...actionButtons(r)); }
  }
}

// ---- detail: charts, config ----
const charts: Record<string, uPlot> = {};
function drawCharts() {
  if (!selected) return;
  const h = history.get(selected);
  if (!h) return;
  for (const [id, label, data] of [["cpu", "CPU %", h.cpu], ["mem", "memory MiB", h.mem], ["pids", "pids", h.pids]] as const) {
    const d: uPlot.AlignedData = [h.t, data as number[]];
    if (!charts[id]) {
      charts[id] = new uPlot({ width: 320, height: 160, title: label, series: [{}, { label, stroke: "#2a7", fill: "rgba(34,170,119,.1)" }], axes: [{}, { size: 50 }] }, d, $(`chart-${id}`));
    } else charts[id].setData(d);
  }
}

async function select(name: string) {
  if (selected !== name) { closeTerminal(); for (const k of Object.keys(charts)) { charts[k].destroy(); delete charts[k]; } }
  selected = name;
  $("detail").hidden = false;
  render();
  try { $("config").textContent = JSON.stringify(await api("GET", `/1.0/zones/${name}/config`), null, 2); } catch (e: any) { $("config").textContent = e.message; }
  drawCharts();
}

$("config-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const kv = ($("config-kv") as HTMLInputElement).value.trim();
  if (!selected || !kv) return;
  try {
    await api("PATCH", `/1.0/zones/${selected}/config`, { set: [kv] });
    toast(`${selected}: ${kv}`); await refreshZones(); await select(selected);
  } catch (e: any) { toast(e.message, true); }
});

// ---- terminal ----
let term: Terminal | null = null, sock: WebSocket | null = null;
function closeTerminal() {
  sock?.close(); sock = null; term?.dispose(); term = null;
  ($("term-open") as HTMLButtonElement).disabled = false; ($("term-close") as HTMLButtonElement).disabled = true;
}
$("term-close").onclick = closeTerminal;
$("term-open").onclick = () => {
  if (!selected) return;
  closeTerminal();
  term = new Terminal({ cursorBlink: true, fontSize: 13, convertEol: false });
  const fit = new FitAddon(); term.loadAddon(fit);
  term.open($("terminal")); fit.fit();
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ui/terminal/${selected}?cols=${term.cols}&rows=${term.rows}`;
  const s = new WebSocket(url); s.binaryType = "arraybuffer"; sock = s;
  const t = term, enc = new TextEncoder();
  s.onmessage = (m) => t.write(typeof m.data === "string" ? m.data : new Uint8Array(m.data));
  s.onclose = () => t.write("\r\n[disconnected]\r\n");
  t.onData((d) => s.readyState === 1 && s.send(enc.encode(d)));
  t.onResize(({ cols, rows }) => s.readyState === 1 && s.send(JSON.stringify({ resize: [cols, rows] })));
  ($("term-open") as HTMLButtonElement).disabled = true; ($("term-close") as HTMLButtonElement).disabled = false;
  (window as any).warrenTerminal = t;
  t.focus();
};

// ---- host memory, doctor ----
function kvTable(id: string, pairs: [string, string][]) {
  $(id).querySelector("tbody")!.replaceChildren(...pairs.map(([k, v]) => {
    const tr = document.createElement("tr"); const a = document.createElement("td"); const b = document.createElement("td");
    a.textContent = k; b.textContent = v; tr.append(a, b); return tr;
  }));
}
async function refreshMemstat() {
  const m: Json = await api("GET", "/1.0/memstat");
  const pairs: [string, string][] = [];
  const walk = (v: Json, p: string) => {
    if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, p ? `${p}.${k}` : k);
    else if (p.endsWith("_bytes")) pairs.push([p.replace(/_bytes$/, ""), bytes(v)]);
  };
  walk(m.host, "host"); walk(m.zones, "zones");
  kvTable("memstat", pairs);
}
$("doctor-run").onclick = async () => {
  try {
    const d: Json = await api("GET", "/1.0/doctor");
    const show = (v: Json) => v == null ? "–" : typeof v === "object" ? ("value" in v ? String(v.value) : JSON.stringify(v)) : String(v);
    const tb = $("doctor").querySelector("tbody")!;
    tb.replaceChildren(...(d.findings ?? []).map((f: Json) => {
      const tr = document.createElement("tr");
      for (const [i, c] of [f.limit, show(f.current), show(f.needed), f.unit, f.verdict, f.note ?? ""].entries()) {
        const td = document.createElement("td"); td.textContent = String(c ?? "");
        if (i === 4) td.className = `verdict-${c}`;
        tr.append(td);
      }
      return tr;
    }));
    const p = d.plan ?? {};
    $("doctor-plan").textContent = `for ${p.zones} zones × ${p.procs_per_zone} processes, ${p.threads_per_zone} threads (net ${p.net})`;
  } catch (e: any) { toast(e.message, true); }
};

// ---- events (SSE) ----
function connectEvents() {
  const es = new EventSource("/1.0/events");
  es.onopen = () => { $("conn").textContent = "live"; $("conn").className = "ok"; };
  es.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").className = "bad"; };
  const onEvent = (m: MessageEvent) => {
    let e: Json; try { e = JSON.parse(m.data); } catch { return; }
    const tr = document.createElement("tr");
    for (const c of [new Date(e.time_ms ?? e.ts_ms ?? Date.now()).toLocaleTimeString(), m.type, e.zone ?? "", e.event ?? e.action ?? e.kind ?? JSON.stringify(e)]) {
      const td = document.createElement("td"); td.textContent = String(c); tr.append(td);
    }
    const tb = $("events").querySelector("tbody")!; tb.prepend(tr);
    while (tb.children.length > 200) tb.lastChild!.remove();
    if (e.zone) {
      const r = rows.get(e.zone);
      const st = e.state ?? e.to ?? e.new_state;
      if (r && typeof st === "string") { r.state = st; render(); }
      // The event names what happened; the list says what it left.
      void refreshZones();
    }
  };
  for (const t of ["lifecycle", "config", "agent", "oom", "message"]) es.addEventListener(t, onEvent as any);
}

// ---- wiring ----
document.querySelectorAll<HTMLElement>("th[data-sort]").forEach((th) => th.onclick = () => {
  const k = th.dataset.sort!; sortDesc = sortKey === k ? !sortDesc : false; sortKey = k; render();
});
$("filter").oninput = render;
function showTab() {
  const tab = (location.hash || "#zones").slice(1);
  for (const t of ["zones", "host", "doctor", "events"]) $(`tab-${t}`).hidden = t !== tab;
  document.querySelectorAll<HTMLElement>("nav a").forEach((a) => a.classList.toggle("on", a.dataset.tab === tab));
  if (tab === "host") refreshMemstat().catch((e) => toast(e.message, true));
}
window.onhashchange = showTab;
showTab();
const safe = (f: () => Promise<void>) => () => f().catch((e) => toast(e.message, true));
safe(refreshZones)().then(() => safe(refreshStat)());
connectEvents();
setInterval(safe(refreshStat), 3000);
setInterval(safe(refreshZones), 15000);
