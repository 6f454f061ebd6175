// goroutine-trace viewer: draws the embedded trace on one <canvas>.
//
// Data layout: see the comment at the top of src/html.rs (columns of numbers,
// times delta-encoded per array). Everything is decoded once into typed
// arrays; a frame then touches only what is visible:
//
// * Slices of a P never overlap and are sorted by start, so the first visible
//   slice is a binary search away. A slice at least 1.5 px wide is drawn as
//   is. Narrower slices are merged per pixel column: a binary search finds the
//   slices that start in the column, a prefix sum of durations gives how busy
//   the column is (drawn as the rectangle's opacity), and the longest of them
//   (or a sample when there are many) gives its colour. A frame costs
//   O(width * lanes * log n) however many slices the trace has.
// * Instant marks are indexed per (lane, kind) and drawn at most once per
//   pixel column, skipping the rest with a binary search.
// * Wakeup arrows are drawn only when few enough are in view.
//
// #render-stats carries counters of the last frame (lanes, slices
// represented, rectangles, marks, arrows) for the headless-browser test.
window.addEventListener('error', function (ev) {
  const rs = document.getElementById('render-stats');
  if (rs) rs.dataset.error = String(ev.message);
});
(function () {
  'use strict';

  const loadStart = performance.now();
  const D = JSON.parse(document.getElementById('trace-data').textContent);
  const parsed = performance.now();
  const META = D.meta;
  const DUR = Math.max(1, META.duration);

  const WAIT = ['none', 'join', 'chan receive', 'chan send', 'select', 'select (no cases)',
    'chan receive (nil chan)', 'chan send (nil chan)', 'sync.Mutex.Lock', 'sync.RWMutex.RLock',
    'sync.RWMutex.Lock', 'sync.Cond.Wait', 'sync.WaitGroup.Wait', 'sync.Once.Do', 'semacquire',
    'sleep', 'IO wait', 'block_on'];
  const ENDS = ['yield', 'preempted', 'yield-local', 'goroutine end', 'syscall', 'P stopped',
    'replaced (lost event)', 'trace end', 'stopped', 'P revoked (blocked in the kernel)'];
  const SYS_END = ['exit', 'handed off', 'P stopped', 'trace end'];
  const MARK_NAMES = ['steal', 'preemption', 'syscall enter', 'syscall exit (fast)',
    'syscall exit (waited for a P)', 'syscall handoff', 'timer fire', 'netpoll ready',
    'P revoked (blocked in the kernel)'];
  const MARK_COLORS = ['#7c3aed', '#dc2626', '#d97706', '#16a34a', '#65a30d', '#ea580c', '#2563eb', '#0d9488',
    '#be123c'];
  // Mark kinds per lane in the (lane, kind) index (more than MARK_NAMES.length).
  const NKINDS = 16;
  // System call labels of the revoke marks (mark.b indexes it).
  const SYSCALLS = D.syscalls || [];
  const STATE_COLORS = { running: '#22a06b', runnable: '#f0a020', syscall: '#d9534f', waiting: '#9aa7bd' };

  function reasonText(r) {
    if (r >= 100) {
      const w = r - 100;
      return 'blocked: ' + (WAIT[w] || ('wait reason ' + w));
    }
    return ENDS[r] || ('reason ' + r);
  }

  // ---- decoding -------------------------------------------------------
  function cum(a) {
    const r = new Float64Array(a.length);
    let t = 0;
    for (let i = 0; i < a.length; i++) { t += a[i]; r[i] = t; }
    return r;
  }
  function spans(o) {
    const s = cum(o.s);
    const n = s.length;
    const e = new Float64Array(n);
    const pre = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) {
      e[i] = s[i] + o.d[i];
      pre[i + 1] = pre[i] + o.d[i];
    }
    return { s: s, e: e, pre: pre, n: n };
  }

  const NL = D.procs.length;
  const lanes = D.lanes.map(function (L, i) {
    const sp = spans(L);
    sp.p = D.procs[i];
    sp.g = Float64Array.from(L.g);
    sp.r = Int32Array.from(L.r);
    sp.util = D.util[i] / DUR;
    return sp;
  });
  const sys = D.sys.map(function (L) {
    const sp = spans(L);
    sp.g = Float64Array.from(L.g);
    sp.k = Int32Array.from(L.k);
    return sp;
  });
  const marks = {
    t: cum(D.marks.t), l: Int32Array.from(D.marks.l), k: Int32Array.from(D.marks.k),
    a: Float64Array.from(D.marks.a), b: Float64Array.from(D.marks.b),
  };
  // Per (lane, kind) index of marks: lane -1 (runtime) is key 0.
  const markIdx = [];
  (function () {
    const lists = [];
    for (let i = 0; i < marks.t.length; i++) {
      const key = (marks.l[i] + 1) * NKINDS + marks.k[i];
      (lists[key] || (lists[key] = [])).push(i);
    }
    for (let key = 0; key < lists.length; key++) {
      if (!lists[key]) continue;
      const idx = Int32Array.from(lists[key]);
      const t = new Float64Array(idx.length);
      for (let j = 0; j < idx.length; j++) t[j] = marks.t[idx[j]];
      markIdx.push({ lane: Math.floor(key / NKINDS) - 1, kind: key % NKINDS, idx: idx, t: t });
    }
  })();
  const wake = {
    t: cum(D.wake.t), l: Int32Array.from(D.wake.l), w: Int32Array.from(D.wake.w),
    e: Float64Array.from(D.wake.e), g: Float64Array.from(D.wake.g),
  };
  const ms = D.ms.map(function (M) {
    const sp = spans(M);
    sp.m = M.m;
    sp.p = Int32Array.from(M.p);
    return sp;
  });
  const counts = {
    t: cum(D.counts.t), r: D.counts.r, n: D.counts.n, w: D.counts.w, y: D.counts.y,
  };
  const runq = D.runq.map(function (R) { return { t: cum(R.t), n: R.n }; });
  const grunq = { t: cum(D.grunq.t), n: D.grunq.n };
  const names = new Map();
  for (let i = 0; i < D.names.g.length; i++) names.set(D.names.g[i], D.names.n[i]);

  // ---- helpers --------------------------------------------------------
  // First index i with a[i] > x (a sorted ascending).
  function upper(a, x, lo, hi) {
    lo = lo || 0; hi = hi === undefined ? a.length : hi;
    while (lo < hi) { const m = (lo + hi) >>> 1; if (a[m] > x) hi = m; else lo = m + 1; }
    return lo;
  }
  // First index i with a[i] >= x.
  function lower(a, x, lo, hi) {
    lo = lo || 0; hi = hi === undefined ? a.length : hi;
    while (lo < hi) { const m = (lo + hi) >>> 1; if (a[m] >= x) hi = m; else lo = m + 1; }
    return lo;
  }
  function fmtT(ns) {
    const a = Math.abs(ns);
    if (a < 1e3) return ns.toFixed(0) + ' ns';
    if (a < 1e6) return (ns / 1e3).toFixed(a < 1e4 ? 2 : 1) + ' \u00b5s';
    if (a < 1e9) return (ns / 1e6).toFixed(a < 1e7 ? 3 : 2) + ' ms';
    return (ns / 1e9).toFixed(3) + ' s';
  }
  function gLabel(g) {
    const n = names.get(g);
    return n === undefined ? 'G' + g : 'G' + g + ' ' + n;
  }
  // Stable colour per goroutine id: a hash of the id picks hue, saturation, lightness.
  const colorCache = new Map();
  function gColor(g) {
    let c = colorCache.get(g);
    if (c) return c;
    let h = Math.imul((g % 4294967296) | 0, 2654435761) ^ Math.floor(g / 4294967296);
    h ^= h >>> 15; h = Math.imul(h, 2246822519); h ^= h >>> 13; h = Math.imul(h, 3266489917); h ^= h >>> 16;
    h >>>= 0;
    c = 'hsl(' + (h % 360) + ',' + (52 + (h >>> 9) % 28) + '%,' + (46 + (h >>> 17) % 16) + '%)';
    if (colorCache.size > 100000) colorCache.clear();
    colorCache.set(g, c);
    return c;
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c];
    });
  }
  const $ = function (id) { return document.getElementById(id); };

  // ---- header ----------------------------------------------------------
  $('title').textContent = META.title;
  (function () {
    const parts = [
      ['duration', fmtT(META.duration)], ['GOMAXPROCS', META.gomaxprocs], ['goroutines', META.goroutines],
      ['slices', META.slices], ['events', META.events], ['batches', META.batches],
      ['dropped events', META.dropped],
    ];
    if (META.unixStart !== '0') {
      const ms = Number(BigInt(META.unixStart) / BigInt(1000000));
      parts.push(['started', new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC']);
    }
    $('summary').innerHTML = parts.map(function (p) { return esc(p[0]) + ' <b>' + esc(p[1]) + '</b>'; }).join(' &middot; ');
    if (META.warning) {
      $('warning').hidden = false;
      $('warning').textContent = 'Incomplete trace: ' + META.warning;
    }
    const leg = [['running', STATE_COLORS.running], ['runnable', STATE_COLORS.runnable],
      ['syscall', STATE_COLORS.syscall], ['waiting', STATE_COLORS.waiting]];
    let html = 'Goroutine slices are coloured by goroutine id. Marks:';
    for (let k = 0; k < MARK_NAMES.length; k++) html += '<i style="background:' + MARK_COLORS[k] + '"></i>' + MARK_NAMES[k];
    html += '<br>Counts:';
    for (const l of leg) html += '<i style="background:' + l[1] + '"></i>' + l[0];
    html += '<i style="background:#8b93a7"></i>syscall span (P held by a goroutine in a syscall)';
    html += '<br>M lanes: the P an M holds (coloured as in the run-queue legend), light grey while parked.';
    $('legend').innerHTML = html;
  })();

  // ---- layout -----------------------------------------------------------
  const LABEL_W = 92, RIGHT_PAD = 8, AXIS_H = 26, RT_H = 16, LANE_H = 30, M_H = 11, GAP = 10;
  const COUNT_H = 110, RUNQ_H = 90;
  const canvas = $('timeline');
  const ctx = canvas.getContext('2d');
  const layers = { sys: true, steal: true, preempt: true, timer: true, netpoll: true, wake: true, ms: true };
  let view = { t0: 0, t1: DUR };
  let selected = null; // goroutine id
  let W = 0, H = 0;
  let rows = null; // y positions

  function computeRows() {
    let y = AXIS_H;
    const r = { rt: y };
    y += RT_H + 2;
    r.p = [];
    for (let i = 0; i < NL; i++) { r.p.push(y); y += LANE_H; }
    r.m = [];
    if (layers.ms) {
      y += 6;
      for (let i = 0; i < ms.length; i++) { r.m.push(y); y += M_H; }
    }
    y += GAP + 14;
    r.counts = y; y += COUNT_H;
    y += GAP + 14;
    r.runq = y; y += RUNQ_H;
    y += 18;
    r.h = y;
    return r;
  }

  function resize() {
    const dpr = window.devicePixelRatio || 1;
    rows = computeRows();
    W = Math.max(300, canvas.parentElement.clientWidth - 14);
    H = rows.h;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    canvas.style.height = H + 'px';
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  const plotW = function () { return W - LABEL_W - RIGHT_PAD; };
  const scale = function () { return plotW() / (view.t1 - view.t0); };
  const X = function (t) { return LABEL_W + (t - view.t0) * scale(); };
  const T = function (x) { return view.t0 + (x - LABEL_W) / scale(); };

  // ---- drawing -----------------------------------------------------------
  let stats = null;

  function drawAxis() {
    const span = view.t1 - view.t0;
    const target = span / Math.max(2, plotW() / 110);
    const pow = Math.pow(10, Math.floor(Math.log10(target)));
    let step = pow;
    for (const m of [1, 2, 5, 10]) { if (pow * m >= target) { step = pow * m; break; } }
    ctx.fillStyle = '#f5f6f8';
    ctx.fillRect(0, 0, W, AXIS_H);
    ctx.strokeStyle = '#d9dde5';
    ctx.beginPath(); ctx.moveTo(0, AXIS_H - 0.5); ctx.lineTo(W, AXIS_H - 0.5); ctx.stroke();
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.fillStyle = '#4b5563';
    const first = Math.ceil(view.t0 / step) * step;
    ctx.strokeStyle = '#eceef2';
    for (let t = first; t <= view.t1; t += step) {
      const x = Math.round(X(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, rows.h - 18); ctx.stroke();
      ctx.fillText(fmtT(t), x + 3, AXIS_H / 2);
    }
    ctx.fillStyle = '#f5f6f8';
    ctx.fillRect(0, 0, LABEL_W - 2, AXIS_H - 1);
    ctx.fillStyle = '#6b7280';
    ctx.fillText('time', 8, AXIS_H / 2);
  }

  function laneLabel(y, h, text, sub) {
    ctx.fillStyle = '#1d2330';
    ctx.font = (h >= 20 ? '12px' : '10px') + ' system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.fillText(text, 8, y + (sub ? h / 2 - 5 : h / 2));
    if (sub) {
      ctx.fillStyle = '#6b7280';
      ctx.font = '10px system-ui, sans-serif';
      ctx.fillText(sub, 8, y + h / 2 + 7);
    }
  }

  function drawSlices(L, y, h) {
    const n = L.n;
    if (!n) return;
    const sc = scale();
    const x0 = LABEL_W, x1 = W - RIGHT_PAD;
    let i = upper(L.e, view.t0);
    // A slice ending exactly at t0 is not visible, but a zero-length one at t0 is.
    while (i > 0 && L.e[i - 1] === view.t0 && L.s[i - 1] === view.t0) i--;
    ctx.font = '10px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    while (i < n && L.s[i] <= view.t1) {
      const xs = LABEL_W + (L.s[i] - view.t0) * sc;
      const xe = LABEL_W + (L.e[i] - view.t0) * sc;
      if (xe - xs >= 1.5) {
        const g = L.g[i];
        const a = Math.max(x0, xs), b = Math.min(x1, xe);
        ctx.globalAlpha = selected === null || selected === g ? 1 : 0.22;
        ctx.fillStyle = gColor(g);
        ctx.fillRect(a, y, Math.max(1, b - a - (xe - xs > 4 ? 0.5 : 0)), h);
        if (b - a > 44) {
          ctx.fillStyle = '#fff';
          ctx.globalAlpha *= 0.95;
          const label = gLabel(g);
          ctx.save();
          ctx.beginPath(); ctx.rect(a, y, b - a - 2, h); ctx.clip();
          ctx.fillText(label, a + 3, y + h / 2);
          ctx.restore();
        }
        stats.slices++; stats.rects++;
        i++;
        continue;
      }
      // Merge the sub-pixel slices that start in this pixel column.
      const col = Math.floor(xs);
      const colEnd = view.t0 + (col + 1 - LABEL_W) / sc;
      let j = lower(L.s, colEnd, i + 1);
      if (j > i + 1) {
        const k = j - 1; // the last one may be wide: draw it on its own
        if ((L.e[k] - L.s[k]) * sc >= 1.5) j = k;
      }
      const busy = L.pre[j] - L.pre[i];
      let g;
      if (j - i <= 32) {
        let best = i;
        for (let k = i + 1; k < j; k++) if (L.e[k] - L.s[k] > L.e[best] - L.s[best]) best = k;
        g = L.g[best];
      } else {
        g = L.g[i + ((j - i) >> 1)];
      }
      let hit = selected === null;
      if (!hit && j - i <= 64) for (let k = i; k < j && !hit; k++) hit = L.g[k] === selected;
      const frac = Math.min(1, busy * sc);
      ctx.globalAlpha = (0.35 + 0.65 * frac) * (hit ? 1 : 0.22);
      ctx.fillStyle = gColor(selected !== null && hit ? selected : g);
      if (col >= x0 - 1 && col < x1) ctx.fillRect(Math.max(x0, col), y, 1, h);
      stats.slices += j - i; stats.rects++;
      i = j;
    }
    ctx.globalAlpha = 1;
  }

  function drawSys(S, y, h) {
    if (!layers.sys || !S.n) return;
    const sc = scale();
    let i = upper(S.e, view.t0);
    ctx.fillStyle = '#8b93a7';
    let lastX = -1;
    while (i < S.n && S.s[i] <= view.t1) {
      const a = Math.max(LABEL_W, LABEL_W + (S.s[i] - view.t0) * sc);
      const b = Math.min(W - RIGHT_PAD, LABEL_W + (S.e[i] - view.t0) * sc);
      if (b - a >= 1 || Math.floor(a) !== lastX) {
        ctx.fillRect(a, y + h - 6, Math.max(1, b - a), 5);
        lastX = Math.floor(a);
        stats.rects++;
      }
      i++;
      if (b - a < 1) {
        // Skip the rest of this pixel column.
        i = Math.max(i, lower(S.s, view.t0 + (lastX + 1 - LABEL_W) / sc, i));
      }
    }
  }

  function laneY(l) { return l < 0 ? rows.rt : rows.p[l]; }
  function laneH(l) { return l < 0 ? RT_H : LANE_H - 4; }

  function markOn(kind) {
    switch (kind) {
      case 0: return layers.steal;
      case 1: return layers.preempt;
      case 2: case 3: case 4: case 5: case 8: return layers.sys;
      case 6: return layers.timer;
      default: return layers.netpoll;
    }
  }

  // Adds the glyph of a mark to the current path (one fill per group).
  function glyph(kind, x, y, h) {
    switch (kind) {
      case 0: // steal: triangle pointing down at the top
        ctx.moveTo(x - 4, y); ctx.lineTo(x + 4, y); ctx.lineTo(x, y + 6); ctx.closePath(); break;
      case 1: // preempt: red bar through the lane top
        ctx.rect(x - 1, y, 2, 9); break;
      case 2: // syscall enter: up tick at the bottom
        ctx.moveTo(x - 3, y + h); ctx.lineTo(x + 3, y + h); ctx.lineTo(x, y + h - 6); ctx.closePath(); break;
      case 3: case 4: // syscall exit
        ctx.moveTo(x - 3, y + h - 6); ctx.lineTo(x + 3, y + h - 6); ctx.lineTo(x, y + h); ctx.closePath(); break;
      case 5: // handoff: diamond in the middle
        ctx.moveTo(x, y + h / 2 - 5); ctx.lineTo(x + 5, y + h / 2); ctx.lineTo(x, y + h / 2 + 5); ctx.lineTo(x - 5, y + h / 2);
        ctx.closePath(); break;
      case 6: // timer: circle at the top
        ctx.moveTo(x + 3, y + 4); ctx.arc(x, y + 4, 3, 0, 2 * Math.PI); break;
      case 8: // P revoked: a bar across the lane with a cap at the top
        ctx.rect(x - 1, y, 2, h); ctx.rect(x - 4, y, 8, 3); break;
      default: // netpoll: square at the top
        ctx.rect(x - 3, y + 1, 6, 6); break;
    }
  }

  // The rectangle version of glyph(), for crowded views.
  function glyphRect(kind, x, y, h) {
    switch (kind) {
      case 0: ctx.fillRect(x - 3, y, 6, 4); break;
      case 1: ctx.fillRect(x - 1, y, 2, 9); break;
      case 2: ctx.fillRect(x - 2, y + h - 5, 4, 5); break;
      case 3: case 4: ctx.fillRect(x - 2, y + h - 5, 4, 5); break;
      case 5: ctx.fillRect(x - 3, y + h / 2 - 3, 6, 6); break;
      case 8: ctx.fillRect(x - 1, y, 2, h); break;
      default: ctx.fillRect(x - 2.5, y + 1, 5, 5); break;
    }
  }

  // Marks of one (lane, kind) closer than this many pixels are drawn once.
  const MARK_GAP = 3;
  function drawMarks() {
    const sc = scale();
    const x1 = W - RIGHT_PAD;
    for (const grp of markIdx) {
      if (!markOn(grp.kind)) continue;
      if (grp.lane >= NL) continue;
      const y = laneY(grp.lane), h = laneH(grp.lane);
      const n = grp.t.length;
      const xs = [];
      let i = lower(grp.t, view.t0);
      while (i < n && grp.t[i] <= view.t1) {
        const x = LABEL_W + (grp.t[i] - view.t0) * sc;
        if (x > x1) break;
        xs.push(x, grp.idx[i]);
        // Next mark at least MARK_GAP pixels further.
        i = Math.max(i + 1, lower(grp.t, view.t0 + (x + MARK_GAP - LABEL_W) / sc, i + 1));
      }
      if (!xs.length) continue;
      // Many marks: plain rectangles (paths are slow to fill in bulk).
      const many = xs.length > 600;
      if (grp.kind === 0 && grp.lane >= 0) {
        // Steals: a line from the victim lane (dot) to the thief lane.
        ctx.fillStyle = 'rgba(124,58,237,0.5)';
        for (let k = 0; k < xs.length; k += 2) {
          const v = marks.a[xs[k + 1]];
          if (v < 0 || v >= NL) continue;
          const vy = laneY(v) + LANE_H / 2 - 2, ty = y + 3;
          ctx.fillRect(xs[k] - 0.5, Math.min(vy, ty), 1, Math.abs(vy - ty));
          ctx.fillRect(xs[k] - 1.5, vy - 1.5, 3, 3);
        }
      }
      ctx.fillStyle = MARK_COLORS[grp.kind];
      if (many) {
        for (let k = 0; k < xs.length; k += 2) glyphRect(grp.kind, xs[k], y, h);
      } else {
        ctx.beginPath();
        for (let k = 0; k < xs.length; k += 2) glyph(grp.kind, xs[k], y, h);
        ctx.fill();
      }
      if (grp.kind === 8 && xs.length <= 400) {
        // P revoked: labelled with the system call the thread was blocked in.
        ctx.font = '10px sans-serif';
        ctx.textBaseline = 'top';
        for (let k = 0; k < xs.length; k += 2) {
          const label = SYSCALLS[marks.b[xs[k + 1]]] || '?';
          ctx.fillText(label, xs[k] + 5, y + 4);
          stats.labels += 1;
        }
      }
      stats.marks += xs.length / 2;
    }
  }

  function drawWakeups() {
    if (!layers.wake) return;
    const a = lower(wake.t, view.t0), b = upper(wake.t, view.t1);
    // More arrows than this are a smear: ask for a zoom instead.
    const maxArrows = selected === null ? Math.min(1500, plotW() / 4) : 5000;
    if (b - a > maxArrows && selected === null) {
      ctx.fillStyle = '#6b7280';
      ctx.font = '10px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      ctx.fillText((b - a) + ' wakeups in view: zoom in to see their arrows', LABEL_W + 6, rows.rt + RT_H / 2);
      return;
    }
    ctx.lineWidth = 1;
    for (let i = a; i < b; i++) {
      const g = wake.g[i];
      if (selected !== null && g !== selected) continue;
      const fl = wake.l[i], tl = wake.w[i];
      if (tl < 0 || tl >= NL || fl >= NL) continue;
      const x0 = X(wake.t[i]), x1 = X(wake.t[i] + wake.e[i]);
      const y0 = fl < 0 ? rows.rt + RT_H / 2 : rows.p[fl] + LANE_H / 2 - 2;
      const y1 = rows.p[tl] + LANE_H / 2 - 2;
      ctx.strokeStyle = selected !== null ? 'rgba(20,20,20,0.85)' : 'rgba(30,64,175,0.45)';
      ctx.beginPath();
      ctx.moveTo(x0, y0);
      const mx = (x0 + x1) / 2;
      ctx.bezierCurveTo(mx, y0, mx, y1, x1, y1);
      ctx.stroke();
      // Arrow head at the woken goroutine's start.
      ctx.fillStyle = ctx.strokeStyle;
      ctx.beginPath();
      ctx.moveTo(x1, y1); ctx.lineTo(x1 - 5, y1 - 3); ctx.lineTo(x1 - 5, y1 + 3);
      ctx.fill();
      stats.arrows++;
    }
  }

  function drawMs() {
    if (!layers.ms) return;
    const sc = scale();
    for (let k = 0; k < ms.length; k++) {
      const M = ms[k], y = rows.m[k];
      let i = upper(M.e, view.t0);
      while (i < M.n && M.s[i] <= view.t1) {
        const a = Math.max(LABEL_W, LABEL_W + (M.s[i] - view.t0) * sc);
        const b = Math.min(W - RIGHT_PAD, LABEL_W + (M.e[i] - view.t0) * sc);
        const p = M.p[i];
        ctx.fillStyle = p < 0 ? '#e3e6ec' : PCOLORS[p % PCOLORS.length];
        ctx.fillRect(a, y + 1, Math.max(1, b - a), M_H - 2);
        stats.rects++;
        i++;
        if (b - a < 1) i = Math.max(i, lower(M.s, view.t0 + (Math.floor(a) + 1 - LABEL_W) / sc, i));
      }
    }
  }

  const PCOLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];

  // Visible samples of a step series, thinned to about two per pixel.
  function visibleRange(t) {
    const a = Math.max(0, upper(t, view.t0) - 1);
    const b = Math.min(t.length, upper(t, view.t1) + 1);
    const stride = Math.max(1, Math.floor((b - a) / (2 * plotW())));
    return { a: a, b: b, stride: stride };
  }

  function chartFrame(y, h, title, note) {
    ctx.fillStyle = '#fafbfc';
    ctx.fillRect(LABEL_W, y, plotW(), h);
    ctx.strokeStyle = '#d9dde5';
    ctx.strokeRect(LABEL_W + 0.5, y + 0.5, plotW() - 1, h - 1);
    ctx.fillStyle = '#1d2330';
    ctx.font = '600 12px system-ui, sans-serif';
    ctx.textBaseline = 'alphabetic';
    ctx.fillText(title, LABEL_W, y - 4);
    if (note) {
      const w = ctx.measureText(title).width;
      ctx.fillStyle = '#6b7280';
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillText(note, LABEL_W + w + 8, y - 4);
    }
  }

  function drawCounts() {
    const y = rows.counts, h = COUNT_H;
    chartFrame(y, h, 'Goroutines', META.countsDerived ? '(derived from the events: the trace has no GoCount samples)' : '(GoCount samples)');
    const t = counts.t;
    if (!t.length) return;
    const vr = visibleRange(t);
    const series = [counts.n, counts.r, counts.y, counts.w];
    const colors = [STATE_COLORS.running, STATE_COLORS.runnable, STATE_COLORS.syscall, STATE_COLORS.waiting];
    let max = 1;
    for (let i = vr.a; i < vr.b; i += vr.stride) {
      const s = counts.n[i] + counts.r[i] + counts.y[i] + counts.w[i];
      if (s > max) max = s;
    }
    axisLabels(y, h, max);
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, y, plotW(), h); ctx.clip();
    // Stacked steps, top layer first so lower layers paint over it.
    for (let layer = series.length - 1; layer >= 0; layer--) {
      ctx.fillStyle = colors[layer];
      ctx.beginPath();
      ctx.moveTo(X(t[vr.a]), y + h);
      let prevY = y + h;
      for (let i = vr.a; i < vr.b; i += vr.stride) {
        let v = 0;
        for (let k = 0; k <= layer; k++) v += series[k][i];
        const yy = y + h - (v / max) * (h - 4);
        const x = X(t[i]);
        ctx.lineTo(x, prevY); ctx.lineTo(x, yy);
        prevY = yy;
      }
      ctx.lineTo(X(view.t1) + 1, prevY);
      ctx.lineTo(X(view.t1) + 1, y + h);
      ctx.closePath();
      ctx.fill();
    }
    ctx.restore();
  }

  function axisLabels(y, h, max) {
    ctx.fillStyle = '#6b7280';
    ctx.font = '10px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    ctx.fillText(String(max), LABEL_W - 6, y + 6);
    ctx.fillText('0', LABEL_W - 6, y + h - 4);
    ctx.textAlign = 'left';
  }

  function drawRunq() {
    const y = rows.runq, h = RUNQ_H;
    const total = runq.reduce(function (a, r) { return a + r.t.length; }, 0);
    chartFrame(y, h, 'Run queues', total ? '(RunqSample: local per P, global dashed)' : '(the trace has no RunqSample events)');
    if (!total) return;
    let max = 1;
    const all = runq.concat([grunq]);
    for (const R of all) {
      const vr = visibleRange(R.t);
      for (let i = vr.a; i < vr.b; i += vr.stride) if (R.n[i] > max) max = R.n[i];
    }
    axisLabels(y, h, max);
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, y, plotW(), h); ctx.clip();
    ctx.lineWidth = 1.25;
    all.forEach(function (R, li) {
      if (!R.t.length) return;
      const global = li === runq.length;
      ctx.strokeStyle = global ? '#111827' : PCOLORS[li % PCOLORS.length];
      ctx.setLineDash(global ? [4, 3] : []);
      const vr = visibleRange(R.t);
      ctx.beginPath();
      let prevY = null;
      for (let i = vr.a; i < vr.b; i += vr.stride) {
        const x = X(R.t[i]);
        const yy = y + h - 2 - (R.n[i] / max) * (h - 6);
        if (prevY === null) ctx.moveTo(x, yy); else { ctx.lineTo(x, prevY); ctx.lineTo(x, yy); }
        prevY = yy;
      }
      if (prevY !== null) ctx.lineTo(X(view.t1) + 1, prevY);
      ctx.stroke();
    });
    ctx.setLineDash([]);
    ctx.restore();
    // Legend of P colours.
    ctx.font = '10px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const per = Math.max(1, Math.floor((h - 4) / 11));
    for (let l = 0; l < Math.min(NL, per * 2); l++) {
      const lx = 8 + Math.floor(l / per) * 40, ly = y + 4 + (l % per) * 11;
      ctx.fillStyle = PCOLORS[l % PCOLORS.length];
      ctx.fillRect(lx, ly, 8, 8);
      ctx.fillStyle = '#4b5563';
      ctx.fillText('P' + lanes[l].p, lx + 11, ly + 4);
    }
  }

  let pendingSel = null; // shift-drag range

  function draw() {
    const started = performance.now();
    stats = { slices: 0, rects: 0, marks: 0, arrows: 0, labels: 0 };
    ctx.clearRect(0, 0, W, H);
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, W, H);
    drawAxis();
    // Runtime lane.
    ctx.fillStyle = '#fbfbfc';
    ctx.fillRect(LABEL_W, rows.rt, plotW(), RT_H);
    laneLabel(rows.rt, RT_H, 'runtime');
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, 0, plotW(), H); ctx.clip();
    const tick = function (name, since) { const now = performance.now(); prof[name] = (now - since).toFixed(1); return now; };
    const prof = {};
    let t = performance.now();
    for (let l = 0; l < NL; l++) {
      const y = rows.p[l];
      ctx.fillStyle = l % 2 ? '#f7f8fa' : '#fdfdfe';
      ctx.fillRect(LABEL_W, y, plotW(), LANE_H);
      drawSlices(lanes[l], y + 2, LANE_H - 4);
    }
    t = tick('slices', t);
    for (let l = 0; l < NL; l++) drawSys(sys[l], rows.p[l] + 2, LANE_H - 4);
    drawMs();
    t = tick('spans', t);
    drawMarks();
    t = tick('marks', t);
    drawWakeups();
    t = tick('wakeups', t);
    ctx.restore();
    for (let l = 0; l < NL; l++) {
      laneLabel(rows.p[l], LANE_H, 'P' + lanes[l].p, (lanes[l].util * 100).toFixed(1) + '% busy');
    }
    if (layers.ms) {
      ctx.fillStyle = '#6b7280';
      ctx.font = '9px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      for (let k = 0; k < ms.length; k++) ctx.fillText('M' + ms[k].m, 8, rows.m[k] + M_H / 2);
    }
    drawCounts();
    drawRunq();
    tick('charts', t);
    if (pendingSel) {
      const a = Math.min(pendingSel.x0, pendingSel.x1), b = Math.max(pendingSel.x0, pendingSel.x1);
      ctx.fillStyle = 'rgba(37,99,235,0.12)';
      ctx.fillRect(a, AXIS_H, b - a, H - AXIS_H);
      ctx.strokeStyle = 'rgba(37,99,235,0.6)';
      ctx.strokeRect(a + 0.5, AXIS_H + 0.5, b - a, H - AXIS_H - 1);
    }
    $('view-range').textContent = fmtT(view.t0) + ' \u2013 ' + fmtT(view.t1) + '  (' + fmtT(view.t1 - view.t0) + ')';
    const rs = $('render-stats');
    rs.dataset.lanes = String(NL);
    rs.dataset.slices = String(stats.slices);
    rs.dataset.rects = String(stats.rects);
    rs.dataset.marks = String(stats.marks);
    rs.dataset.arrows = String(stats.arrows);
    rs.dataset.labels = String(stats.labels);
    rs.dataset.frames = String(Number(rs.dataset.frames) + 1);
    rs.dataset.drawMs = (performance.now() - started).toFixed(1);
    rs.dataset.profile = Object.keys(prof).map(function (k) { return k + ':' + prof[k]; }).join(' ');
    // Where the P lanes are on the page (CSS px), for pixel checks of screenshots.
    const box = canvas.getBoundingClientRect();
    const lanesTop = NL ? rows.p[0] : rows.rt + RT_H;
    rs.dataset.lanesTop = String(Math.round(box.top + window.scrollY + lanesTop));
    rs.dataset.lanesBottom = String(Math.round(box.top + window.scrollY + lanesTop + NL * LANE_H));
    rs.dataset.plotLeft = String(Math.round(box.left + LABEL_W));
    rs.dataset.plotRight = String(Math.round(box.left + W - RIGHT_PAD));
    rs.dataset.ready = '1';
  }

  let rafPending = false;
  function schedule() {
    if (rafPending) return;
    rafPending = true;
    requestAnimationFrame(function () { rafPending = false; draw(); });
  }

  // ---- view changes -------------------------------------------------------
  const MIN_SPAN = 50;
  function setView(t0, t1) {
    let span = Math.max(MIN_SPAN, Math.min(t1 - t0, DUR * 1.2));
    const lo = -DUR * 0.1, hi = DUR * 1.1;
    if (t0 < lo) t0 = lo;
    if (t0 + span > hi) t0 = hi - span;
    view = { t0: t0, t1: t0 + span };
    schedule();
  }
  function zoomAt(x, factor) {
    const t = T(x);
    setView(t - (t - view.t0) * factor, t + (view.t1 - t) * factor);
  }
  function pan(frac) {
    const d = (view.t1 - view.t0) * frac;
    setView(view.t0 + d, view.t1 + d);
  }
  function reset() { setView(0, DUR); }

  $('b-reset').onclick = reset;
  $('b-in').onclick = function () { zoomAt(LABEL_W + plotW() / 2, 0.5); };
  $('b-out').onclick = function () { zoomAt(LABEL_W + plotW() / 2, 2); };
  $('b-left').onclick = function () { pan(-0.25); };
  $('b-right').onclick = function () { pan(0.25); };
  $('b-clear').onclick = function () { select(null); };
  for (const k of Object.keys(layers)) {
    const box = $('l-' + k);
    box.onchange = function () { layers[k] = box.checked; resize(); schedule(); };
  }

  canvas.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    if (Math.abs(ev.deltaX) > Math.abs(ev.deltaY) && !ev.ctrlKey) {
      pan(ev.deltaX / plotW());
      return;
    }
    const dy = ev.deltaMode === 1 ? ev.deltaY * 30 : ev.deltaY;
    zoomAt(Math.max(LABEL_W, x), Math.exp(dy * 0.0015));
  }, { passive: false });

  let drag = null;
  canvas.addEventListener('mousedown', function (ev) {
    const r = canvas.getBoundingClientRect();
    drag = { x: ev.clientX - r.left, y: ev.clientY - r.top, t0: view.t0, t1: view.t1, moved: false, shift: ev.shiftKey };
    canvas.classList.add('dragging');
    ev.preventDefault();
  });
  window.addEventListener('mousemove', function (ev) {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    if (drag) {
      if (Math.abs(x - drag.x) > 2) drag.moved = true;
      if (drag.shift) {
        pendingSel = { x0: drag.x, x1: x };
        schedule();
      } else if (drag.moved) {
        const dt = (x - drag.x) / (plotW() / (drag.t1 - drag.t0));
        setView(drag.t0 - dt, drag.t1 - dt);
      }
      hideTip();
      return;
    }
    if (x < 0 || y < 0 || x > W || y > H) { hideTip(); return; }
    hover(x, y, ev.clientX, ev.clientY);
  });
  window.addEventListener('mouseup', function (ev) {
    if (!drag) return;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    canvas.classList.remove('dragging');
    if (drag.shift && pendingSel && Math.abs(pendingSel.x1 - pendingSel.x0) > 3) {
      const a = T(Math.min(pendingSel.x0, pendingSel.x1)), b = T(Math.max(pendingSel.x0, pendingSel.x1));
      pendingSel = null;
      setView(a, b);
    } else if (!drag.moved) {
      pendingSel = null;
      const hit = hitSlice(x, y);
      select(hit ? hit.g : null);
    } else {
      pendingSel = null;
    }
    drag = null;
  });
  window.addEventListener('keydown', function (ev) {
    if (ev.target && ev.target.tagName === 'INPUT') return;
    const c = LABEL_W + plotW() / 2;
    switch (ev.key) {
      case 'w': case 'W': case '+': case '=': zoomAt(c, 0.6); break;
      case 's': case 'S': case '-': zoomAt(c, 1 / 0.6); break;
      case 'a': case 'A': case 'ArrowLeft': pan(-0.2); break;
      case 'd': case 'D': case 'ArrowRight': pan(0.2); break;
      case '0': case 'r': case 'R': reset(); break;
      case 'Escape': select(null); break;
      default: return;
    }
    ev.preventDefault();
  });
  window.addEventListener('resize', function () { resize(); schedule(); });

  // ---- hover ----------------------------------------------------------------
  const tip = $('tooltip');
  function hideTip() { tip.hidden = true; }
  function showTip(html, cx, cy) {
    tip.innerHTML = html;
    tip.hidden = false;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    let left = cx + 14, top = cy + 14;
    if (left + w > window.innerWidth - 4) left = cx - w - 14;
    if (top + h > window.innerHeight - 4) top = cy - h - 14;
    tip.style.left = Math.max(4, left) + 'px';
    tip.style.top = Math.max(4, top) + 'px';
  }

  function laneAt(y) {
    for (let l = 0; l < NL; l++) if (y >= rows.p[l] && y < rows.p[l] + LANE_H) return l;
    if (y >= rows.rt && y < rows.rt + RT_H) return -1;
    return null;
  }

  // The slice under (x, y), or the nearest one within 3 px.
  function hitSlice(x, y) {
    const l = laneAt(y);
    if (l === null || l < 0 || x < LABEL_W) return null;
    const L = lanes[l];
    const t = T(x), tol = 3 / scale();
    let i = upper(L.s, t) - 1;
    let best = -1, bestD = Infinity;
    for (const k of [i - 1, i, i + 1]) {
      if (k < 0 || k >= L.n) continue;
      const d = t < L.s[k] ? L.s[k] - t : t > L.e[k] ? t - L.e[k] : 0;
      if (d < bestD || (d === bestD && d === 0)) { best = k; bestD = d; }
    }
    if (best < 0 || bestD > tol) return null;
    return { lane: l, i: best, g: L.g[best] };
  }

  function hitMark(x, y) {
    const l = laneAt(y);
    if (l === null) return null;
    const t = T(x), tol = 4 / scale();
    let best = null, bestD = Infinity;
    for (const grp of markIdx) {
      if (grp.lane !== l || !markOn(grp.kind)) continue;
      const i = lower(grp.t, t - tol);
      if (i < grp.t.length && Math.abs(grp.t[i] - t) <= tol && Math.abs(grp.t[i] - t) < bestD) {
        bestD = Math.abs(grp.t[i] - t);
        best = grp.idx[i];
      }
    }
    return best;
  }

  function markText(i) {
    const k = marks.k[i];
    let s = '<b>' + MARK_NAMES[k] + '</b>\nat ' + fmtT(marks.t[i]);
    const lane = marks.l[i];
    s += lane >= 0 ? ' on P' + lanes[lane].p : ' (no P)';
    if (k === 0) s += '\nstole ' + marks.b[i] + ' goroutine(s) from P' + (marks.a[i] >= 0 ? lanes[marks.a[i]].p : '?');
    else if (k >= 1 && k <= 4) s += '\n' + esc(gLabel(marks.a[i]));
    else if (k === 6 || k === 7) s += '\ncount ' + marks.b[i];
    else if (k === 8) {
      s += '\n' + esc(gLabel(marks.a[i])) + ' blocked in ' + esc(SYSCALLS[marks.b[i]] || '?') +
        ' outside the runtime;\nits thread goes on without a P until its next runtime call';
    }
    return s;
  }

  function hover(x, y, cx, cy) {
    // Marks win over slices when the pointer is right on one.
    const mi = hitMark(x, y);
    if (mi !== null) { showTip(markText(mi), cx, cy); return; }
    const hit = hitSlice(x, y);
    if (hit) {
      const L = lanes[hit.lane], i = hit.i;
      const g = L.g[i];
      let s = '<b>' + esc(gLabel(g)) + '</b>\nP' + L.p + '\nstart ' + fmtT(L.s[i]) + '\nduration ' + fmtT(L.e[i] - L.s[i]) +
        '\nend ' + fmtT(L.e[i]) + ' (' + esc(reasonText(L.r[i])) + ')';
      if (1 / scale() * 1.5 > L.e[i] - L.s[i]) {
        const a = lower(L.s, T(Math.floor(x))), b = lower(L.s, T(Math.floor(x) + 1));
        if (b - a > 1) s += '\n(' + (b - a) + ' slices merged in this pixel: zoom in)';
      }
      showTip(s, cx, cy);
      return;
    }
    const l = laneAt(y);
    if (l !== null && l >= 0 && layers.sys) {
      const S = sys[l], t = T(x);
      const i = upper(S.s, t) - 1;
      if (i >= 0 && S.e[i] >= t) {
        showTip('<b>syscall</b> ' + esc(gLabel(S.g[i])) + '\nP' + lanes[l].p + ' held from ' + fmtT(S.s[i]) +
          ' for ' + fmtT(S.e[i] - S.s[i]) + '\nended: ' + SYS_END[S.k[i]], cx, cy);
        return;
      }
    }
    if (y >= rows.counts && y < rows.counts + COUNT_H && counts.t.length) {
      const i = Math.max(0, upper(counts.t, T(x)) - 1);
      showTip('<b>goroutines at ' + fmtT(counts.t[i]) + '</b>\nrunning ' + counts.n[i] + '\nrunnable ' + counts.r[i] +
        '\nin syscall ' + counts.y[i] + '\nwaiting ' + counts.w[i], cx, cy);
      return;
    }
    if (y >= rows.runq && y < rows.runq + RUNQ_H && grunq.t.length + runq.length) {
      const t = T(x);
      let s = '';
      runq.forEach(function (R, l) {
        if (!R.t.length) return;
        const i = Math.max(0, upper(R.t, t) - 1);
        s += '\nP' + lanes[l].p + ' local ' + R.n[i];
      });
      if (grunq.t.length) s += '\nglobal ' + grunq.n[Math.max(0, upper(grunq.t, t) - 1)];
      showTip('<b>run queues at ' + fmtT(t) + '</b>' + s, cx, cy);
      return;
    }
    hideTip();
  }

  // ---- selection and the goroutine table -------------------------------------
  function select(g) {
    selected = g;
    for (const tr of tbody.rows) tr.classList.toggle('sel', Number(tr.dataset.g) === g);
    schedule();
  }

  const TOP = D.top;
  const cols = [
    ['G', function (i) { return TOP.g[i]; }, function (v) { return '<span class="sw" style="background:' + gColor(v) + '"></span>' + v; }],
    ['name', function (i) { return names.get(TOP.g[i]) || ''; }, esc],
    ['running', function (i) { return TOP.run[i]; }, fmtT],
    ['runnable', function (i) { return TOP.rbl[i]; }, fmtT],
    ['blocked', function (i) { return TOP.blk[i]; }, fmtT],
    ['syscall', function (i) { return TOP.sys[i]; }, fmtT],
    ['total', function (i) { return TOP.run[i] + TOP.rbl[i] + TOP.blk[i] + TOP.sys[i]; }, fmtT],
    ['slices', function (i) { return TOP.sl[i]; }, String],
    ['created', function (i) { return TOP.c[i]; }, function (v) { return v < 0 ? '\u2013' : fmtT(v); }],
    ['ended', function (i) { return TOP.e[i]; }, function (v) { return v < 0 ? '\u2013' : fmtT(v); }],
  ];
  const thead = $('gtable').tHead, tbody = $('gtable').tBodies[0];
  let sortCol = 6, sortDesc = true;
  function renderTable() {
    const n = TOP.g.length;
    const order = Array.from({ length: n }, function (_, i) { return i; });
    const key = cols[sortCol][1];
    order.sort(function (a, b) {
      const x = key(a), y = key(b);
      const c = x < y ? -1 : x > y ? 1 : 0;
      return sortDesc ? -c : c;
    });
    thead.innerHTML = '<tr>' + cols.map(function (c, k) {
      return '<th data-k="' + k + '">' + c[0] + (k === sortCol ? (sortDesc ? ' \u25be' : ' \u25b4') : '') + '</th>';
    }).join('') + '</tr>';
    const html = [];
    for (const i of order) {
      html.push('<tr data-g="' + TOP.g[i] + '"' + (TOP.g[i] === selected ? ' class="sel"' : '') + '>' +
        cols.map(function (c) { return '<td>' + c[2](c[1](i)) + '</td>'; }).join('') + '</tr>');
    }
    tbody.innerHTML = html.join('');
    $('table-note').textContent = n < META.goroutines
      ? '(top ' + n + ' of ' + META.goroutines + ' goroutines by total time; click a header to sort, a row to highlight)'
      : '(' + n + ' goroutines; click a header to sort, a row to highlight)';
  }
  thead.addEventListener('click', function (ev) {
    const th = ev.target.closest('th');
    if (!th) return;
    const k = Number(th.dataset.k);
    if (k === sortCol) sortDesc = !sortDesc; else { sortCol = k; sortDesc = k !== 1 && k !== 0; }
    renderTable();
  });
  tbody.addEventListener('click', function (ev) {
    const tr = ev.target.closest('tr');
    if (!tr) return;
    const g = Number(tr.dataset.g);
    const i = TOP.g.indexOf(g);
    select(g);
    if (i >= 0) {
      const a = TOP.c[i] >= 0 ? TOP.c[i] : 0, b = TOP.e[i] >= 0 ? TOP.e[i] : DUR;
      const pad = Math.max(100, (b - a) * 0.05);
      setView(a - pad, b + pad);
    }
    window.scrollTo({ top: 0, behavior: 'smooth' });
  });

  // The URL fragment can set the view: #view=T0,T1 (ns) and &g=ID to select a goroutine.
  function fromHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    const v = (h.get('view') || '').split(',').map(Number);
    if (v.length === 2 && isFinite(v[0]) && isFinite(v[1]) && v[1] > v[0]) view = { t0: v[0], t1: v[1] };
    if (h.get('g') !== null && isFinite(Number(h.get('g')))) selected = Number(h.get('g'));
    benchFrames = Math.min(100, Number(h.get('bench')) || 0);
    selfTest = h.get('selftest') === '1';
    const p = (h.get('probe') || '').split(',').map(Number);
    if (p.length === 2 && isFinite(p[0]) && p[1] >= 0 && p[1] < NL) probeAt = { t: p[0], lane: p[1] };
  }
  let benchFrames = 0;
  let selfTest = false;
  // #probe=T,LANE: hover at time T (ns) over P lane LANE once drawn (tests, screenshots).
  let probeAt = null;

  // #selftest=1: drive the page with synthetic input events (as a person
  // would: wheel, drag, click, keys, buttons, table headers) and record in
  // data-selftest whether each changed the view as it should.
  function runSelfTest() {
    const out = [];
    const r = canvas.getBoundingClientRect();
    const cx = r.left + LABEL_W + plotW() / 2;
    const ly = NL ? r.top + rows.p[0] + LANE_H / 2 : r.top + rows.rt;
    const span = function () { return view.t1 - view.t0; };
    const check = function (name, ok) { out.push(name + ':' + (ok ? 'ok' : 'FAIL')); };
    const mouse = function (type, x, y, shift) {
      (type === 'mousedown' ? canvas : window).dispatchEvent(new MouseEvent(type, {
        clientX: x, clientY: y, bubbles: true, cancelable: true, shiftKey: !!shift,
      }));
    };
    reset();
    let before = span();
    canvas.dispatchEvent(new WheelEvent('wheel', { clientX: cx, clientY: ly, deltaY: -400, bubbles: true, cancelable: true }));
    check('wheel-in', span() < before * 0.8);
    before = span();
    canvas.dispatchEvent(new WheelEvent('wheel', { clientX: cx, clientY: ly, deltaY: 200, bubbles: true, cancelable: true }));
    check('wheel-out', span() > before * 1.1);
    const t0 = view.t0;
    before = span();
    mouse('mousedown', cx, ly); mouse('mousemove', cx + 60, ly); mouse('mousemove', cx + 120, ly); mouse('mouseup', cx + 120, ly);
    check('drag', view.t0 < t0 && Math.abs(span() - before) < before * 0.01 + 1);
    mouse('mousedown', cx - 200, ly, true); mouse('mousemove', cx - 100, ly, true); mouse('mouseup', cx - 100, ly, true);
    check('shift-drag', span() < before * 0.2);
    $('b-reset').click();
    check('reset', view.t0 === 0 && view.t1 === DUR);
    $('b-in').click();
    check('button-in', span() < DUR * 0.6);
    $('b-right').click();
    check('button-pan', view.t0 > 0);
    window.dispatchEvent(new KeyboardEvent('keydown', { key: '0', bubbles: true }));
    window.dispatchEvent(new KeyboardEvent('keydown', { key: 'w', bubbles: true }));
    check('key-w', span() < DUR * 0.7);
    reset();
    // Click on the middle of the first slice of the busiest lane: selects its goroutine.
    let best = -1;
    for (let l = 0; l < NL; l++) if (lanes[l].n && (best < 0 || lanes[l].n > lanes[best].n)) best = l;
    if (best >= 0) {
      const L = lanes[best];
      let k = 0;
      for (let i = 1; i < L.n; i++) if (L.e[i] - L.s[i] > L.e[k] - L.s[k]) k = i;
      setView(L.s[k] - (L.e[k] - L.s[k]), L.e[k] + (L.e[k] - L.s[k]));
      const x = r.left + X((L.s[k] + L.e[k]) / 2), y = r.top + rows.p[best] + LANE_H / 2;
      mouse('mousedown', x, y); mouse('mouseup', x, y);
      check('click-select', selected === L.g[k]);
      window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
      check('esc-clear', selected === null);
    }
    if (tbody.rows.length > 1) {
      thead.rows[0].cells[0].click(); // sort by G
      const first = Number(tbody.rows[0].dataset.g);
      thead.rows[0].cells[0].click(); // and the other way
      check('sort', Number(tbody.rows[0].dataset.g) !== first && thead.rows[0].cells[0].textContent.indexOf('G') === 0);
      tbody.rows[1].cells[0].click();
      check('row-select', selected === Number(tbody.rows[1].dataset.g) && span() < DUR);
    }
    $('l-ms').click();
    check('toggle-ms', !layers.ms && canvas.height > 0);
    $('l-ms').click();
    reset();
    select(null);
    draw();
    $('render-stats').dataset.selftest = out.join(' ');
  }

  // ---- start ---------------------------------------------------------------------
  fromHash();
  renderTable();
  resize();
  // Load timings: page start to script, JSON.parse, decoding into typed arrays.
  $('render-stats').dataset.load = 'script-at:' + loadStart.toFixed(0) + ' parse:' + (parsed - loadStart).toFixed(0) +
    ' decode:' + (performance.now() - parsed).toFixed(0);
  draw(); // synchronously, so the counters are set when the page has loaded
  if (probeAt) {
    const r = canvas.getBoundingClientRect();
    const x = X(probeAt.t), y = rows.p[probeAt.lane] + LANE_H / 2;
    hover(x, y, r.left + x, r.top + y);
  }
  if (selfTest) runSelfTest();
  if (benchFrames > 0) {
    // #bench=N: redraw N more times and report the mean (the first frame pays for JIT warm-up).
    const t0 = performance.now();
    for (let k = 0; k < benchFrames; k++) draw();
    $('render-stats').dataset.benchMs = ((performance.now() - t0) / benchFrames).toFixed(2);
  }
})();
