// The lintel console: reads /status, /window and /ready from this admin listener every second
// and draws them, and follows /events into a bounded feed. Every name shown comes from a
// client: it is only ever set as text (textContent, text nodes), never parsed as HTML.
"use strict";

const REFRESH_MS = 1000;
// The feed keeps the newest FEED_LIMIT events; a lost stream is opened again after FEED_RETRY_MS.
const FEED_LIMIT = 50;
const FEED_RETRY_MS = 2000;
// Pools named in one feed entry, and the longest unfinished event text read, before giving up.
const FEED_POOLS = 8;
const FEED_BUFFER = 64 * 1024;
const SVG = "http://www.w3.org/2000/svg";
const COLOURS = {
  ok: "#3fb950",
  warn: "#d29922",
  bad: "#f85149",
  orange: "#ff7b39",
  violet: "#a371f7",
  muted: "#8b949e",
  blue: "#58a6ff",
  pink: "#f778ba",
  brown: "#b08060",
};
const OUTCOMES = [
  ["completed", COLOURS.ok],
  ["no-worker", COLOURS.warn],
  ["worker-lost", COLOURS.bad],
  ["timeout", COLOURS.orange],
  ["refused", COLOURS.violet],
  ["cancelled", COLOURS.muted],
  ["draining", COLOURS.blue],
  ["peer-lost", COLOURS.pink],
  ["shut-down", COLOURS.brown],
];
// Worker states the page knows a look for; any other value is shown as it comes.
const WORKER_STATES = ["serving", "eligible", "probation", "unreachable", "draining"];

const $ = (id) => document.getElementById(id);

// An element with attributes and children; a string child becomes a text node.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, String(value));
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

// Makes `old` look like `fresh`, keeping the nodes that are already right, so a refresh does
// not replace a row or a link an operator is pointing at.
function morph(old, fresh) {
  if (old.nodeType !== fresh.nodeType || old.nodeName !== fresh.nodeName) {
    old.replaceWith(fresh);
    return;
  }
  if (old.nodeType === Node.TEXT_NODE) {
    if (old.data !== fresh.data) old.data = fresh.data;
    return;
  }
  for (const { name } of [...old.attributes]) {
    if (!fresh.hasAttribute(name)) old.removeAttribute(name);
  }
  for (const { name, value } of [...fresh.attributes]) {
    if (old.getAttribute(name) !== value) old.setAttribute(name, value);
  }
  morphChildren(old, [...fresh.childNodes]);
}

// Makes `parent`'s children look like `children`.
function morphChildren(parent, children) {
  const old = [...parent.childNodes];
  children.forEach((child, i) => {
    if (i < old.length) morph(old[i], child);
    else parent.append(child);
  });
  for (const extra of old.slice(children.length)) extra.remove();
}

function setText(id, text) {
  const node = $(id);
  if (node.textContent !== text) node.textContent = text;
}

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

function duration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

function millis(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1) return `${Number((ms * 1000).toPrecision(3))} µs`;
  if (ms < 1000) return `${Number(ms.toPrecision(3))} ms`;
  return `${Number((ms / 1000).toPrecision(3))} s`;
}

function rate(perSecond) {
  if (perSecond >= 1000) return `${(perSecond / 1000).toFixed(1)}k`;
  if (perSecond >= 10) return `${Math.round(perSecond)}`;
  return perSecond.toFixed(1);
}

// A worker's state: the `state` a node reports, else what `draining` says.
function workerState(worker) {
  if (typeof worker.state === "string" && worker.state !== "") return worker.state;
  return worker.draining ? "draining" : "serving";
}

// ---- the header ----

function drawHeader(status, ready, tls) {
  setText("node-id", status.node_id);
  document.title = `${status.node_id} · lintel console`;
  const readiness = $("readiness");
  let text = "ready";
  let tone = "ok";
  if (status.draining) {
    text = "draining";
    tone = "warn";
  } else if (!ready.ok) {
    text = `not ready: ${ready.reason}`;
    tone = "warn";
  }
  readiness.textContent = text;
  readiness.className = `pill ${tone}`;
  setText("uptime", duration(status.uptime_ms));
  setText("connections", String(status.connections));
  if (!tls) {
    setText("tls", "off");
  } else {
    const days = tls.not_after_unix_s ? (tls.not_after_unix_s * 1000 - Date.now()) / 86400000 : null;
    let shown = days === null ? "on" : `on, expires in ${Math.floor(days)} d`;
    if (tls.failures > 0 && tls.last_error) shown += ` · last reload failed`;
    setText("tls", shown);
    $("tls").className = days !== null && days < 14 ? "warn-text" : "";
    $("tls").title = tls.last_error || `${plural(tls.reloads, "reload", "reloads")}`;
  }
  setText("updated", new Date().toLocaleTimeString());
}

// ---- the tiles and plots over the window ----

function drawTiles(window, status) {
  const points = window.points;
  const last = points[points.length - 1];
  setText("in-flight", last ? String(last.in_flight) : "–");
  const waiting = status.waiting.reduce((sum, w) => sum + w.waiting, 0);
  setText("waiting", String(waiting));
  const minute = window.last_minute;
  const rates = minute ? minute.rates : {};
  setText("completed-rate", rate(rates.completed || 0));
  setText(
    "other-rate",
    rate(Object.entries(rates).reduce((sum, [name, r]) => (name === "completed" ? sum : sum + r), 0)),
  );
  setText("p50", millis(minute ? minute.p50_ms : null));
  setText("p99", millis(minute ? minute.p99_ms : null));
}

// A nice upper bound for an axis holding `max`.
function niceMax(max) {
  if (!(max > 0)) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(max)));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * power >= max) return step * power;
  }
  return 10 * power;
}

// The vertical scale of a plot: where a value sits (0 at the bottom, 1 at the top), and the
// values to label. Linear from 0 to a nice maximum, or by decades when `log` is set.
function scaleFor(values, log) {
  if (!log) {
    const max = niceMax(Math.max(0, ...values));
    return { at: (v) => v / max, ticks: [0, 1, 2, 3, 4].map((i) => (max * i) / 4) };
  }
  const positive = values.filter((v) => v > 0);
  let low = Math.floor(Math.log10(positive.length ? Math.min(...positive) : 0.1));
  let high = Math.ceil(Math.log10(positive.length ? Math.max(...positive) : 10));
  if (high <= low) high = low + 1;
  const ticks = [];
  for (let d = low; d <= high; d++) ticks.push(Math.pow(10, d));
  return { at: (v) => (v > 0 ? (Math.log10(v) - low) / (high - low) : null), ticks };
}

// Draws `series` ([{name, colour, values: [number|null]}]) over the window's span into `plot`.
function drawPlot(plotId, legendId, window, series, format, log) {
  const plot = $(plotId);
  const width = 480;
  const height = 170;
  const left = 52;
  const right = 8;
  const bottom = 20;
  const top = 8;
  // The whole ring once it holds more than a minute; the last minute until then.
  const span = Math.min(window.span, Math.max(60, window.points.length));
  const innerW = width - left - right;
  const innerH = height - top - bottom;
  const shown = series.filter((s) => s.always || s.values.some((v) => v));
  const scale = scaleFor(shown.flatMap((s) => s.values.filter((v) => v !== null)), log);
  const yOf = (v) => top + innerH - innerH * v;
  const drawn = [];
  for (const tick of scale.ticks) {
    const y = yOf(scale.at(tick));
    drawn.push(svg("line", { x1: left, x2: width - right, y1: y, y2: y, class: "grid-line" }));
    const label = svg("text", { x: left - 6, y: y + 3.5, class: "axis", "text-anchor": "end" });
    label.textContent = tick === 0 ? "0" : format(tick);
    drawn.push(label);
  }
  const step = span <= 120 ? 15 : 60;
  for (let ago = 0; ago <= span; ago += step) {
    const x = left + innerW - (innerW * ago) / span;
    const anchor = ago === 0 ? "end" : ago + step > span ? "start" : "middle";
    const label = svg("text", { x, y: height - 5, class: "axis", "text-anchor": anchor });
    label.textContent = ago === 0 ? "now" : step === 60 ? `-${ago / 60}m` : `-${ago}s`;
    drawn.push(label);
  }
  const points = Math.min(window.points.length, span);
  const offset = span - points;
  for (const s of shown) {
    let path = "";
    let pen = "M";
    s.values.slice(-points).forEach((value, i) => {
      const at = value === null ? null : scale.at(value);
      if (at === null) {
        pen = "M";
        return;
      }
      const x = left + (innerW * (offset + i + 1)) / span;
      path += `${pen}${x.toFixed(1)},${yOf(at).toFixed(1)} `;
      pen = "L";
    });
    if (path) drawn.push(svg("path", { d: path, class: "series", stroke: s.colour }));
  }
  morphChildren(plot, drawn);
  morphChildren(
    $(legendId),
    shown.map((s) => {
      const last = [...s.values].reverse().find((v) => v !== null);
      const swatch = svg("svg", { class: "swatch", viewBox: "0 0 10 10" });
      swatch.append(svg("rect", { width: 10, height: 10, rx: 2, fill: s.colour }));
      return el("li", {}, swatch, s.name, el("b", {}, last === undefined ? "–" : format(last)));
    }),
  );
}

function drawPlots(window) {
  const points = window.points;
  drawPlot(
    "plot-outcomes",
    "legend-outcomes",
    window,
    OUTCOMES.map(([name, colour]) => ({
      name,
      colour,
      always: name === "completed",
      values: points.map((p) => p.rates[name] || 0),
    })),
    rate,
  );
  drawPlot(
    "plot-latency",
    "legend-latency",
    window,
    [
      { name: "p50", colour: COLOURS.blue, always: true, values: points.map((p) => p.p50_ms) },
      { name: "p99", colour: COLOURS.warn, always: true, values: points.map((p) => p.p99_ms) },
    ],
    millis,
    true,
  );
  drawPlot(
    "plot-load",
    "legend-load",
    window,
    [
      { name: "in flight", colour: COLOURS.ok, always: true, values: points.map((p) => p.in_flight) },
      { name: "waiting", colour: COLOURS.warn, always: true, values: points.map((p) => p.waiting) },
    ],
    (n) => (Number.isInteger(n) ? String(n) : n.toFixed(1)),
  );
}

// ---- the mesh ----

// Up to two names, then how many more, as a hint after a count.
function shortList(names) {
  if (names.length === 0) return null;
  const shown = names.slice(0, 2).join(", ");
  const more = names.length > 2 ? ` and ${names.length - 2} more` : "";
  return el("span", { class: "hint list" }, ` ${shown}${more}`);
}

function linkPill(text, tone) {
  return el("span", { class: `pill ${tone}` }, text);
}

function drawMesh(status, consoles) {
  const rows = [
    el(
      "tr",
      { class: "self", "data-node-id": status.node_id },
      el("td", {}, el("b", {}, status.node_id), el("span", { class: "hint" }, " this node")),
      el("td", {}, "–"),
      el("td", {}, linkPill(status.draining ? "draining" : "serving", status.draining ? "warn" : "ok")),
      el("td", {}, String(status.pools.length)),
      el("td", {}, "–"),
      el("td", {}, "–"),
      el("td", {}, "–"),
      el("td", {}, el("span", { class: "hint" }, "here")),
    ),
  ];
  let up = 0;
  for (const peer of status.peers) {
    const linked = peer.state === "Up";
    if (linked) up += 1;
    const tone = linked ? (peer.synced ? "ok" : "warn") : "bad";
    const state = linked ? (peer.synced ? "up" : "up, syncing") : "connecting";
    const url = consoles[peer.node_id];
    const link =
      typeof url === "string" && /^https?:\/\//.test(url)
        ? el("a", { href: url, rel: "noopener noreferrer" }, "open")
        : el("span", { class: "hint", title: "set peer_console on this node to link peers' consoles" }, "unknown");
    rows.push(
      el(
        "tr",
        { "data-node-id": peer.node_id, "data-link": state },
        el("td", {}, el("b", {}, peer.node_id || "(not linked yet)")),
        el("td", { class: "mono" }, peer.address),
        el("td", {}, linkPill(state, tone)),
        el("td", { title: peer.pools.join("\n") }, String(peer.pools.length), shortList(peer.pools)),
        el("td", {}, String(peer.relays_sent)),
        el("td", {}, String(peer.relays_received)),
        el("td", {}, String(peer.relays_in_flight)),
        el("td", {}, link),
      ),
    );
  }
  morphChildren($("mesh").tBodies[0], rows);
  setText(
    "mesh-summary",
    status.peers.length === 0 ? "a single node" : `${up} of ${plural(status.peers.length, "peer", "peers")} linked`,
  );
}

// ---- pools and workers ----

// A bar of `used` and `free` slots out of `slots`, with the draining rest.
function capacityBar(used, free, slots) {
  const bar = svg("svg", { class: "bar", viewBox: "0 0 100 10", preserveAspectRatio: "none" });
  const whole = Math.max(slots, 1);
  const usedW = (100 * used) / whole;
  const freeW = (100 * free) / whole;
  bar.append(svg("rect", { x: 0, y: 0, width: 100, height: 10, class: "bar-rest" }));
  bar.append(svg("rect", { x: 0, y: 0, width: usedW, height: 10, class: "bar-used" }));
  bar.append(svg("rect", { x: usedW, y: 0, width: freeW, height: 10, class: "bar-free" }));
  return bar;
}

function poolFigures(pool) {
  let slots = 0;
  let used = 0;
  let free = 0;
  for (const w of pool.workers) {
    slots += w.max_concurrency;
    used += w.in_flight;
    if (!w.draining) free += Math.max(0, w.max_concurrency - w.in_flight);
  }
  return { slots, used, free, draining: Math.max(0, slots - used - free) };
}

// A value a client may leave out, or a muted dash.
function optional(value) {
  return value === null || value === undefined ? el("span", { class: "hint" }, "–") : String(value);
}

function figure(field, value, label) {
  return el("span", { class: `figure ${field}` }, el("b", { "data-field": field }, String(value)), ` ${label}`);
}

function drawWorkers(pool) {
  const rows = pool.workers.map((w) => {
    const state = workerState(w);
    const known = WORKER_STATES.includes(state) ? state : "other";
    return el(
      "tr",
      { "data-worker-id": w.worker_id },
      el("td", { class: "mono" }, String(w.worker_id)),
      el("td", { class: "identity" }, w.identity),
      el("td", {}, optional(w.label)),
      el("td", { class: "deployment" }, optional(w.deployment)),
      el("td", { class: "instance mono" }, optional(w.instance_id)),
      el("td", { class: "activities" }, w.activity_types.join(", ")),
      el("td", {}, capacityBar(w.in_flight, w.draining ? 0 : Math.max(0, w.max_concurrency - w.in_flight), w.max_concurrency), ` ${w.in_flight} / ${w.max_concurrency}`),
      el("td", {}, el("span", { class: `state state-${known}`, "data-state": state }, state)),
    );
  });
  return el(
    "table",
    { class: "grid workers" },
    el(
      "thead",
      {},
      el("tr", {}, ...["worker", "identity", "label", "deployment", "instance", "activities", "slots in use", "state"].map((h) => el("th", {}, h))),
    ),
    el("tbody", {}, ...rows),
  );
}

// The time a setting was made, as this browser writes times.
function clock(unixMs) {
  return new Date(unixMs).toLocaleTimeString();
}

// A pool's current deployment as its card shows it: the deployment a dispatch naming none is
// sent to, or nothing when none is set.
function deploymentPill(current) {
  if (!current || typeof current.deployment !== "string") return null;
  return el(
    "span",
    {
      class: "pill deploy",
      "data-deployment": current.deployment,
      title: `current deployment, set by ${current.set_by} at ${clock(current.set_at_unix_ms)}`,
    },
    "current deployment ",
    el("b", { "data-field": "deployment" }, current.deployment),
  );
}

// A pool's own outcome rates and push-to-reply latency over the last seconds, from /window's
// `pools` ({span_ms, channels: {channel: {counts, rates, p50_ms, p99_ms}}}). A pool missing
// there has dashes: read by no sample yet, or counted under `other` (past metrics_max_pools).
function trafficFigures(pool, traffic) {
  if (!traffic || typeof traffic !== "object" || !traffic.channels) return [];
  const own = Object.prototype.hasOwnProperty.call(traffic.channels, pool.channel) ? traffic.channels[pool.channel] : null;
  const title = !own
    ? "no figures of this pool's own: not sampled yet, or past metrics_max_pools and counted under other"
    : `outcomes per second and push-to-reply latency over the last ${Math.round(traffic.span_ms / 1000)} s`;
  const rates = own ? own.rates || {} : null;
  const other = rates ? Object.entries(rates).reduce((sum, [name, r]) => (name === "completed" ? sum : sum + r), 0) : null;
  return [
    el(
      "span",
      { class: "traffic", title },
      figure("completed-rate", rates ? rate(rates.completed || 0) : "–", "completed / s"),
      figure("other-rate", rates ? rate(other) : "–", "other outcomes / s"),
      figure("p50", millis(own ? own.p50_ms : null), "p50"),
      figure("p99", millis(own ? own.p99_ms : null), "p99"),
    ),
  ];
}

function drawPools(status, traffic) {
  const current = new Map((status.current_deployments || []).map((c) => [c.channel, c]));
  const cards = status.pools.map((pool) => {
    const f = poolFigures(pool);
    const card = el(
      "article",
      { class: "pool", "data-channel": pool.channel },
      el(
        "header",
        {},
        el("h3", {}, el("span", { class: "ns" }, pool.namespace), el("span", { class: "sep" }, " / "), pool.task_queue),
        el("span", { class: "mono hint channel" }, pool.channel),
        deploymentPill(current.get(pool.channel)),
      ),
      el(
        "div",
        { class: "capacity" },
        capacityBar(f.used, f.free, f.slots),
        el(
          "div",
          { class: "figures" },
          figure("used", f.used, "in use"),
          figure("free", f.free, "free"),
          f.draining > 0 ? figure("draining", f.draining, "draining") : null,
          figure("slots", f.slots, "slots"),
          figure("workers", pool.workers.length, pool.workers.length === 1 ? "worker" : "workers"),
          ...trafficFigures(pool, traffic),
        ),
      ),
      drawWorkers(pool),
    );
    return card;
  });
  const pools = $("pools");
  if (cards.length === 0) {
    morphChildren(pools, [el("p", { class: "hint" }, "No worker is registered on this node.")]);
  } else {
    morphChildren(pools, cards);
  }
  // A worker serving several pools is listed in each, and counted once.
  const workers = new Set(status.pools.flatMap((p) => p.workers.map((w) => w.worker_id))).size;
  setText("pools-summary", `${plural(status.pools.length, "pool", "pools")}, ${plural(workers, "worker", "workers")} on this node`);
}

// Every pool's current deployment this node knows, those with no worker here included.
function drawDeployments(status) {
  const settings = status.current_deployments || [];
  const rows = settings.map((c) =>
    el(
      "tr",
      { "data-channel": c.channel, "data-deployment": c.deployment === null ? "" : c.deployment },
      el("td", { class: "mono" }, c.channel),
      el("td", {}, c.deployment === null ? el("span", { class: "hint" }, "cleared: any deployment") : el("b", {}, c.deployment)),
      el("td", {}, c.set_by),
      el("td", {}, clock(c.set_at_unix_ms)),
    ),
  );
  if (rows.length === 0) {
    rows.push(
      el("tr", {}, el("td", { colSpan: 4, class: "hint" }, "No pool has a current deployment: a dispatch naming none may go to any worker.")),
    );
  }
  morphChildren($("deployments").tBodies[0], rows);
  const set = settings.filter((c) => c.deployment !== null).length;
  setText("deployments-summary", set === 0 ? "" : `${plural(set, "pool", "pools")} with one set`);
}

function drawWaiting(status) {
  const rows = status.waiting.map((w) =>
    el(
      "tr",
      {},
      el("td", {}, w.namespace),
      el("td", {}, w.task_queue),
      el("td", {}, w.activity_type),
      el("td", {}, String(w.waiting)),
      el("td", {}, w.census && w.census.reason ? String(w.census.reason) : "–"),
    ),
  );
  if (rows.length === 0) {
    rows.push(el("tr", {}, el("td", { colSpan: 5, class: "hint" }, "No dispatch is waiting.")));
  }
  morphChildren($("waiting-list").tBodies[0], rows);
}

// ---- the event feed ----

// The newest events first, at most FEED_LIMIT; the lines of one event (one a pool) are one entry.
const feed = [];

const EVENT_NAMES = {
  worker_registered: "registered",
  worker_excluded: "excluded",
  worker_restored: "restored",
  worker_departed: "departed",
  peer_up: "peer up",
  peer_down: "peer down",
  missed: "missed",
};

// Adds one `data:` line of /events to the feed; a line that is not an event object is skipped.
function receive(text) {
  let line;
  try {
    line = JSON.parse(text);
  } catch {
    return;
  }
  if (!line || typeof line !== "object" || typeof line.event !== "string") return;
  const newest = feed[0];
  if (newest && newest.seq === line.seq && newest.event === line.event) {
    if (typeof line.pool === "string") {
      newest.poolCount += 1;
      if (newest.pools.length < FEED_POOLS) newest.pools.push(line.pool);
    }
  } else {
    const pools = typeof line.pool === "string" ? [line.pool] : [];
    feed.unshift({ ...line, pools, poolCount: pools.length });
    if (feed.length > FEED_LIMIT) feed.length = FEED_LIMIT;
  }
  drawFeed();
}

// One feed entry: when, what, who, and the rest it carries (pools, deployment, reason).
function feedEntry(e) {
  const attrs = { "data-event": e.event, "data-seq": e.seq };
  if (e.worker_id !== undefined) attrs["data-worker-id"] = e.worker_id;
  const what = EVENT_NAMES[e.event] || e.event;
  const tone = e.event === "worker_departed" || e.event === "peer_down" || e.event === "missed" ? "bad" : e.event === "worker_excluded" ? "warn" : "ok";
  let who = null;
  if (e.identity !== undefined) who = el("span", { class: "who" }, e.identity, el("span", { class: "hint" }, ` worker ${e.worker_id}`));
  else if (e.node_id !== undefined) who = el("span", { class: "who" }, e.node_id, e.address ? el("span", { class: "hint mono" }, ` ${e.address}`) : null);
  else if (e.count !== undefined) who = el("span", { class: "who" }, `${plural(e.count, "event", "events")} the console fell behind on`);
  const details = [];
  if (e.pools.length > 0) {
    const more = e.poolCount > e.pools.length ? ` and ${e.poolCount - e.pools.length} more` : "";
    details.push(el("span", { class: "pools mono" }, `${e.pools.join(", ")}${more}`));
  }
  if (e.deployment !== undefined) details.push(el("span", { class: "deployment" }, `deployment ${e.deployment}`));
  if (e.instance_id !== undefined) details.push(el("span", { class: "instance" }, `instance ${e.instance_id}`));
  if (e.reason !== undefined) details.push(el("span", { class: "reason" }, `reason: ${e.reason}`));
  return el(
    "li",
    attrs,
    el("time", { class: "hint" }, typeof e.at_unix_ms === "number" ? clock(e.at_unix_ms) : ""),
    el("span", { class: `pill ${tone}` }, what),
    who,
    el("span", { class: "details" }, ...details),
  );
}

function drawFeed() {
  const entries = feed.map(feedEntry);
  if (entries.length === 0) entries.push(el("li", { class: "hint" }, "No event since this page opened."));
  morphChildren($("events"), entries);
}

function feedState(text, state) {
  const node = $("events-state");
  node.textContent = text;
  node.dataset.state = state;
}

// Follows /events (Server-Sent Events, read with fetch so the token travels as a header) into
// the feed, and opens it again whenever it ends.
async function followEvents() {
  try {
    const response = await fetch("/events", requestInit());
    if (response.status === 401) {
      feedState(unauthorized("/events"), "refused");
      return;
    }
    if (!response.ok || !response.body) {
      feedState(`/events answered ${response.status}; retrying`, "retrying");
      return;
    }
    // The node subscribes before it answers: from here on, no event is missed.
    feedState("live", "live");
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        for (const line of buffer.slice(0, end).split("\n")) {
          if (line.startsWith("data: ")) receive(line.slice(6));
        }
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\n\n");
      }
      if (buffer.length > FEED_BUFFER) {
        await reader.cancel();
        break;
      }
    }
    feedState("the stream ended; reconnecting, events meanwhile are not shown", "retrying");
  } catch (err) {
    feedState(`cannot read /events: ${err.message}; retrying`, "retrying");
  } finally {
    setTimeout(followEvents, FEED_RETRY_MS);
  }
}

// ---- the refresh loop ----

// With the node's admin_token, the page is opened as /#token=TOKEN: the fragment never leaves
// the browser, and every request carries the token. It is read at each request, so adding it
// to the address takes effect without a reload.
function adminToken() {
  return new URLSearchParams(location.hash.slice(1)).get("token");
}

function requestInit() {
  const token = adminToken();
  return token ? { cache: "no-store", headers: { Authorization: `Bearer ${token}` } } : { cache: "no-store" };
}

// What to do about a 401 from `path`: how to pass the token, or that the one passed is wrong.
function unauthorized(path) {
  const open = `${location.origin}${location.pathname}#token=TOKEN`;
  return adminToken()
    ? `${path} answered 401: the token after #token= is not this node's admin_token`
    : `this node's admin listener needs its admin_token: open the console as ${open}`;
}

async function readJson(path) {
  const response = await fetch(path, requestInit());
  if (response.status === 401) throw new Error(unauthorized(path));
  if (!response.ok) throw new Error(`${path} answered ${response.status}`);
  return response.json();
}

async function readReady() {
  const response = await fetch("/ready", requestInit());
  const reason = (await response.text()).trim();
  return { ok: response.ok, reason };
}

async function refresh() {
  try {
    const [status, window, ready] = await Promise.all([readJson("/status"), readJson("/window"), readReady()]);
    drawHeader(status, ready, status.tls);
    drawTiles(window, status);
    drawPlots(window);
    drawMesh(status, status.peer_consoles || {});
    drawPools(status, window.pools);
    drawDeployments(status);
    drawWaiting(status);
    $("problem").hidden = true;
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes) + 1);
  } catch (err) {
    const problem = $("problem");
    problem.textContent = `Cannot read this node: ${err.message}. Retrying every second.`;
    problem.hidden = false;
    $("readiness").textContent = "unreachable";
    $("readiness").className = "pill bad";
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

refresh();
drawFeed();
followEvents();
