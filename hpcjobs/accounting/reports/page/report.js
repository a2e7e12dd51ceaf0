// hpcjobs interactive report: tables that sort, filter and page, SVG charts that zoom and explain
// themselves on hover. Everything it shows comes from the JSON in <script id="hpcjobs-data">; values
// are only ever written as text (textContent, SVG attributes), never parsed as markup. No network.
(function () {
  "use strict";
  var t0 = performance.now();
  var SVG = "http://www.w3.org/2000/svg";
  var COLOURS = ["#1f5f8b", "#e07b39", "#3a9d5d", "#c62828", "#7b5ea7", "#8c6d31", "#d4588f", "#5f6b7a",
                 "#17a2b8", "#b5a300"];
  var STATE_COLOURS = {COMPLETED: "#3a9d5d", FAILED: "#c62828", TIMEOUT: "#e07b39", OUT_OF_MEMORY: "#7b5ea7",
                       CANCELLED: "#8c8c8c", NODE_FAIL: "#8c6d31", PREEMPTED: "#d4588f", RUNNING: "#1f5f8b",
                       PENDING: "#b5a300"};
  var data = JSON.parse(document.getElementById("hpcjobs-data").textContent);
  for (var st in data.state_colours || {}) { STATE_COLOURS[st] = data.state_colours[st]; }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function sv(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs || {}) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function fmt(v) {
    if (v === null || v === undefined) { return "–"; }
    var a = Math.abs(v);
    if (a !== 0 && (a < 0.01 || a >= 1e6)) { return v.toExponential(2); }
    return a >= 100 ? Math.round(v).toLocaleString("en") : String(Math.round(v * 1000) / 1000);
  }
  function fmtAxis(v, unit) {
    if (unit === "%") { return Math.round(v * 100) + "%"; }
    return fmt(v);
  }
  // Time ticks at round steps (UTC); each label as precise as its step needs.
  var TIME_STEPS = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 10800, 21600, 43200, 86400, 172800, 604800, 2592000];
  function timeTicks(lo, hi, n) {
    var raw = (hi - lo) / 1000 / Math.max(1, n), step = TIME_STEPS[TIME_STEPS.length - 1];
    for (var i = 0; i < TIME_STEPS.length; i++) { if (TIME_STEPS[i] >= raw) { step = TIME_STEPS[i]; break; } }
    var ms = step * 1000, out = [];
    for (var v = Math.ceil(lo / ms) * ms; v <= hi; v += ms) { out.push(v); }
    out.step = step;
    return out;
  }
  function fmtTime(ms, step) {
    var iso = new Date(ms).toISOString();
    if (step >= 86400) { return iso.slice(0, 10); }
    if (step >= 60) { return (iso.slice(11, 16) === "00:00" ? iso.slice(5, 10) + " " : "") + iso.slice(11, 16); }
    return iso.slice(11, 19);
  }
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) { return [lo]; }
    var raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = mag;
    [1, 2, 5, 10].some(function (m) { step = m * mag; return step >= raw; });
    var out = [], v = Math.ceil(lo / step) * step;
    for (; v <= hi + step * 1e-9; v += step) { out.push(Math.round(v / step) * step); }
    return out;
  }

  // ------------------------------------------------------------------------------------------ tooltip
  var tip = el("div", {"class": "tip", role: "status"});
  document.body.appendChild(tip);
  function showTip(evt, lines) {
    tip.textContent = "";
    lines.forEach(function (line, i) { tip.appendChild(el(i ? "div" : "strong", {}, line)); });
    tip.style.display = "block";
    var x = evt.clientX + 14, y = evt.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 4) { x = Math.max(4, evt.clientX - w - 14); }
    if (y + h > window.innerHeight - 4) { y = Math.max(4, evt.clientY - h - 14); }
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { tip.style.display = "none"; }

  // ------------------------------------------------------------------------------------------- tables
  function renderTable(spec, box) {
    var state = {sort: -1, desc: false, filter: "", column: -1, page: 0, size: 25};
    var order = spec.rows.map(function (_, i) { return i; });
    var shown = order.slice();
    var bar = el("div", {"class": "tablebar"});
    var select = el("select", {"aria-label": "column to filter"});
    select.appendChild(el("option", {value: "-1"}, "any column"));
    spec.columns.forEach(function (c, i) { select.appendChild(el("option", {value: String(i)}, c.label)); });
    var input = el("input", {type: "search", placeholder: "filter rows…", "aria-label": "filter " + spec.heading});
    var count = el("span", {"class": "count"});
    bar.appendChild(select); bar.appendChild(input); bar.appendChild(count);
    box.appendChild(bar);
    var wrap = el("div", {"class": "tablewrap"});
    var table = el("table", {"data-table": spec.name});
    var thead = el("thead"), tr = el("tr");
    spec.columns.forEach(function (c, i) {
      var th = el("th", {"data-col": c.name, tabindex: "0", title: "sort by " + c.label}, c.label);
      if (c.numeric) { th.className = "num"; }
      th.addEventListener("click", function () { sortBy(i); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sortBy(i); } });
      tr.appendChild(th);
    });
    thead.appendChild(tr); table.appendChild(thead);
    var tbody = el("tbody");
    table.appendChild(tbody); wrap.appendChild(table); box.appendChild(wrap);
    var pager = el("div", {"class": "pager"});
    var prev = el("button", {type: "button"}, "‹ previous"), next = el("button", {type: "button"}, "next ›");
    var where = el("span", {"class": "where"});
    var size = el("select", {"aria-label": "rows per page"});
    [10, 25, 100, 500].forEach(function (n) {
      var o = el("option", {value: String(n)}, n + " rows");
      if (n === state.size) { o.selected = true; }
      size.appendChild(o);
    });
    pager.appendChild(prev); pager.appendChild(where); pager.appendChild(next); pager.appendChild(size);
    box.appendChild(pager);
    if (spec.note) { box.appendChild(el("p", {"class": "note"}, spec.note)); }

    function key(row, i) {
      var c = spec.columns[i], v = spec.rows[row][i];
      if (c.numeric) { var k = spec.keys[row][i]; return k === null ? null : k; }
      return v === null ? null : String(v).toLowerCase();
    }
    function sortBy(i) {
      state.desc = state.sort === i ? !state.desc : !!spec.columns[i].numeric;
      state.sort = i;
      order.sort(function (a, b) {
        var ka = key(a, i), kb = key(b, i);
        if (ka === kb) { return a - b; }
        if (ka === null) { return 1; }
        if (kb === null) { return -1; }
        var r = ka < kb ? -1 : 1;
        return state.desc ? -r : r;
      });
      Array.prototype.forEach.call(thead.querySelectorAll("th"), function (th, j) {
        th.setAttribute("aria-sort", j === i ? (state.desc ? "descending" : "ascending") : "none");
      });
      applyFilter();
    }
    function applyFilter() {
      var f = state.filter, col = state.column;
      shown = !f ? order.slice() : order.filter(function (row) {
        var cells = spec.rows[row];
        if (col >= 0) { return String(cells[col] === null ? "" : cells[col]).toLowerCase().indexOf(f) >= 0; }
        for (var j = 0; j < cells.length; j++) {
          if (String(cells[j] === null ? "" : cells[j]).toLowerCase().indexOf(f) >= 0) { return true; }
        }
        return false;
      });
      state.page = 0;
      draw();
    }
    function draw() {
      var pages = Math.max(1, Math.ceil(shown.length / state.size));
      state.page = Math.min(state.page, pages - 1);
      var from = state.page * state.size, to = Math.min(shown.length, from + state.size);
      tbody.textContent = "";
      for (var n = from; n < to; n++) {
        var row = spec.rows[shown[n]], r = el("tr");
        for (var j = 0; j < row.length; j++) {
          var c = spec.columns[j], td = el("td", c.numeric ? {"class": "num"} : {});
          var link = spec.links && spec.links[shown[n]] && spec.links[shown[n]][j];
          if (link) {
            td.appendChild(el("a", {href: link}, row[j] === null ? "–" : row[j]));
          } else {
            td.textContent = row[j] === null ? "–" : String(row[j]);
          }
          if (c.name === "state" && STATE_COLOURS[row[j]]) { td.style.color = STATE_COLOURS[row[j]]; }
          r.appendChild(td);
        }
        tbody.appendChild(r);
      }
      count.textContent = shown.length === spec.rows.length ? spec.rows.length + " rows"
        : shown.length + " of " + spec.rows.length + " rows";
      where.textContent = shown.length ? "rows " + (from + 1) + "–" + to + " of " + shown.length : "no rows";
      prev.disabled = state.page === 0;
      next.disabled = state.page >= pages - 1;
    }
    input.addEventListener("input", function () { state.filter = input.value.trim().toLowerCase(); applyFilter(); });
    select.addEventListener("change", function () { state.column = Number(select.value); applyFilter(); });
    prev.addEventListener("click", function () { state.page -= 1; draw(); });
    next.addEventListener("click", function () { state.page += 1; draw(); });
    size.addEventListener("change", function () { state.size = Number(size.value); state.page = 0; draw(); });
    draw();
  }

  // ------------------------------------------------------------------------------------------- charts
  var M = {l: 58, r: 14, t: 10, b: 44};

  function frame(box, spec) {
    var width = Math.max(240, Math.floor(box.clientWidth || 600));
    var height = spec.height || Math.round(Math.min(420, Math.max(220, width * 0.5)));
    var svg = sv("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height,
                         role: "img", "aria-label": spec.title, "data-chart": spec.name});
    return {svg: svg, w: width - M.l - M.r, h: height - M.t - M.b, width: width, height: height};
  }
  function axes(f, xs, ys, spec, xTime) {
    var g = sv("g", {"class": "axes"});
    var x0 = xs.domain[0], x1 = xs.domain[1], many = Math.max(2, Math.floor(f.w / (xTime ? 95 : 80)));
    var ticks = xs.ticks || (xTime ? timeTicks(x0, x1, many) : niceTicks(x0, x1, many));
    ticks.forEach(function (v) {
      var x = xs(v);
      if (x < M.l - 0.5 || x > M.l + f.w + 0.5) { return; }
      g.appendChild(sv("line", {x1: x, x2: x, y1: M.t + f.h, y2: M.t + f.h + 4, "class": "tick"}));
      g.appendChild(sv("text", {x: x, y: M.t + f.h + 17, "text-anchor": "middle"},
                       xTime ? fmtTime(v, ticks.step) : (xs.label ? xs.label(v) : fmtAxis(v, spec.x_unit))));
    });
    niceTicks(ys.domain[0], ys.domain[1], Math.max(2, Math.floor(f.h / 50))).forEach(function (v) {
      var y = ys(v);
      g.appendChild(sv("line", {x1: M.l, x2: M.l + f.w, y1: y, y2: y, "class": "grid"}));
      g.appendChild(sv("text", {x: M.l - 6, y: y + 4, "text-anchor": "end"}, fmtAxis(v, spec.y_unit)));
    });
    g.appendChild(sv("text", {x: M.l + f.w / 2, y: f.height - 6, "text-anchor": "middle", "class": "label"},
                     spec.x_label));
    g.appendChild(sv("text", {x: 12, y: M.t + f.h / 2, "text-anchor": "middle", "class": "label",
                              transform: "rotate(-90 12 " + (M.t + f.h / 2) + ")"}, spec.y_label));
    f.svg.appendChild(g);
  }
  function scale(d0, d1, r0, r1) {
    var s = function (v) { return d1 === d0 ? (r0 + r1) / 2 : r0 + (v - d0) * (r1 - r0) / (d1 - d0); };
    s.domain = [d0, d1];
    return s;
  }

  function bars(box, spec) {
    var f = frame(box, spec), b = spec.bins, top = 0;
    b.forEach(function (bin) { top = Math.max(top, bin.count); });
    var n = b.length, xs = scale(0, n, M.l, M.l + f.w), ys = scale(0, top || 1, M.t + f.h, M.t);
    xs.ticks = [];
    var every = Math.max(1, Math.ceil(n / Math.max(2, Math.floor(f.w / 60))));
    for (var i = 0; i <= n; i += every) { xs.ticks.push(i); }
    if (b[n - 1].over) { xs.ticks = xs.ticks.filter(function (i) { return i < n - 1; }).concat([n - 1]); }
    xs.label = function (i) { return i < n ? (b[i].over ? "≥" + b[i].from : b[i].from) : b[n - 1].to; };
    axes(f, xs, ys, spec, false);
    b.forEach(function (bin, i) {
      var x = xs(i) + 1, w = Math.max(1, xs(i + 1) - xs(i) - 2), y = ys(bin.count);
      var r = sv("rect", {x: x, y: y, width: w, height: M.t + f.h - y, "class": bin.over ? "bar over" : "bar"});
      r.addEventListener("mousemove", function (e) {
        showTip(e, [bin.from + " – " + bin.to, bin.count.toLocaleString("en") + " " + (spec.unit || "jobs")]
          .concat(bin.over ? ["clipped: every value above " + bin.from] : []));
      });
      r.addEventListener("mouseleave", hideTip);
      f.svg.appendChild(r);
    });
    return f.svg;
  }

  function hbars(box, spec) {
    var rows = spec.bars, height = Math.max(120, rows.length * 22 + M.t + M.b);
    var f = frame(box, {height: height, title: spec.title, name: spec.name});
    var top = 0;
    rows.forEach(function (r) { top = Math.max(top, r.value); });
    var left = 150, xs = scale(0, top || 1, left, M.l + f.w), rowH = (f.h) / Math.max(1, rows.length);
    var g = sv("g", {"class": "axes"});
    niceTicks(0, top || 1, Math.max(2, Math.floor((M.l + f.w - left) / 80))).forEach(function (v) {
      g.appendChild(sv("line", {x1: xs(v), x2: xs(v), y1: M.t, y2: M.t + f.h, "class": "grid"}));
      g.appendChild(sv("text", {x: xs(v), y: M.t + f.h + 17, "text-anchor": "middle"}, fmtAxis(v, spec.x_unit)));
    });
    g.appendChild(sv("text", {x: left + (M.l + f.w - left) / 2, y: f.height - 6, "text-anchor": "middle",
                              "class": "label"}, spec.x_label));
    f.svg.appendChild(g);
    rows.forEach(function (r, i) {
      var y = M.t + i * rowH;
      var label = r.label.length > 22 ? r.label.slice(0, 21) + "…" : r.label;
      f.svg.appendChild(sv("text", {x: left - 6, y: y + rowH / 2 + 4, "text-anchor": "end"}, label));
      var rect = sv("rect", {x: left, y: y + 3, width: Math.max(1, xs(r.value) - left), height: Math.max(2, rowH - 6),
                             "class": "bar", fill: r.colour || COLOURS[0]});
      rect.addEventListener("mousemove", function (e) { showTip(e, [r.label].concat(r.details || [])); });
      rect.addEventListener("mouseleave", hideTip);
      f.svg.appendChild(rect);
    });
    return f.svg;
  }

  function density(box, spec) {
    var f = frame(box, spec), nx = spec.x_edges.length - 1, ny = spec.y_edges.length - 1, top = 0;
    spec.counts.forEach(function (row) { row.forEach(function (c) { top = Math.max(top, c); }); });
    var xs = scale(spec.x_edges[0], spec.x_edges[nx], M.l, M.l + f.w);
    var ys = scale(spec.y_edges[0], spec.y_edges[ny], M.t + f.h, M.t);
    axes(f, xs, ys, spec, false);
    var logTop = Math.log(1 + top);
    spec.counts.forEach(function (row, j) {
      row.forEach(function (c, i) {
        if (!c) { return; }
        var x = xs(spec.x_edges[i]), y = ys(spec.y_edges[j + 1]);
        var shade = 0.12 + 0.88 * Math.log(1 + c) / logTop;
        var r = sv("rect", {x: x, y: y, width: xs(spec.x_edges[i + 1]) - x + 0.5, height: ys(spec.y_edges[j]) - y + 0.5,
                            fill: COLOURS[0], "fill-opacity": shade.toFixed(3), "class": "cell"});
        r.addEventListener("mousemove", function (e) {
          showTip(e, [c.toLocaleString("en") + " jobs",
                      spec.x_label + ": " + fmtAxis(spec.x_edges[i], spec.x_unit) + " – " + fmtAxis(spec.x_edges[i + 1], spec.x_unit),
                      spec.y_label + ": " + fmtAxis(spec.y_edges[j], spec.y_unit) + " – " + fmtAxis(spec.y_edges[j + 1], spec.y_unit)]);
        });
        r.addEventListener("mouseleave", hideTip);
        f.svg.appendChild(r);
      });
    });
    return f.svg;
  }

  function scatter(box, spec) {
    var f = frame(box, spec);
    var xs = scale(spec.x_range[0], spec.x_range[1], M.l, M.l + f.w);
    var ys = scale(spec.y_range[0], spec.y_range[1], M.t + f.h, M.t);
    axes(f, xs, ys, spec, false);
    spec.points.forEach(function (p) {
      var c = sv("circle", {cx: xs(p[0]), cy: ys(p[1]), r: 4, fill: STATE_COLOURS[p[3]] || "#8c8c8c",
                            "fill-opacity": "0.75", "class": "dot"});
      c.addEventListener("mousemove", function (e) {
        showTip(e, [p[2], spec.x_label + ": " + fmtAxis(p[0], spec.x_unit), spec.y_label + ": " + fmtAxis(p[1], spec.y_unit),
                    "state: " + p[3]]);
      });
      c.addEventListener("mouseleave", hideTip);
      f.svg.appendChild(c);
    });
    return f.svg;
  }

  function lines(box, spec, view) {
    var f = frame(box, spec);
    var x0 = view.x0, x1 = view.x1, top = 0;
    spec.series.forEach(function (s) {
      s.points.forEach(function (p) { if (p[0] >= x0 && p[0] <= x1 && p[1] !== null) { top = Math.max(top, p[1]); } });
    });
    var xs = scale(x0, x1, M.l, M.l + f.w), ys = scale(0, top || 1, M.t + f.h, M.t);
    axes(f, xs, ys, spec, true);
    var clip = "clip-" + spec.name;
    var defs = sv("defs"), cp = sv("clipPath", {id: clip});
    cp.appendChild(sv("rect", {x: M.l, y: M.t, width: f.w, height: f.h}));
    defs.appendChild(cp); f.svg.appendChild(defs);
    spec.series.forEach(function (s, k) {
      var d = "", pen = false;
      s.points.forEach(function (p) {
        if (p[1] === null) { pen = false; return; }
        d += (pen ? "L" : "M") + xs(p[0]).toFixed(1) + "," + ys(p[1]).toFixed(1);
        pen = true;
      });
      f.svg.appendChild(sv("path", {d: d, fill: "none", stroke: COLOURS[k % COLOURS.length], "stroke-width": 1.6,
                                    "clip-path": "url(#" + clip + ")", "data-series": s.name}));
    });
    var legend = sv("g", {"class": "legend"}), lx = M.l + 8;
    spec.series.forEach(function (s, k) {
      legend.appendChild(sv("rect", {x: lx, y: M.t + 4, width: 10, height: 10, fill: COLOURS[k % COLOURS.length]}));
      var t = sv("text", {x: lx + 14, y: M.t + 13}, s.name);
      legend.appendChild(t);
      lx += 24 + 7 * s.name.length;
    });
    f.svg.appendChild(legend);
    var hit = sv("rect", {x: M.l, y: M.t, width: f.w, height: f.h, fill: "transparent", "class": "hit"});
    var brush = sv("rect", {x: 0, y: M.t, width: 0, height: f.h, "class": "brush", display: "none"});
    var cursor = sv("line", {x1: 0, x2: 0, y1: M.t, y2: M.t + f.h, "class": "cursor", display: "none"});
    f.svg.appendChild(cursor); f.svg.appendChild(brush); f.svg.appendChild(hit);
    var start = null;
    function xAt(evt) {
      var r = f.svg.getBoundingClientRect();
      return Math.min(M.l + f.w, Math.max(M.l, (evt.clientX - r.left) * f.width / r.width));
    }
    function atTime(px) { return x0 + (px - M.l) * (x1 - x0) / f.w; }
    hit.addEventListener("mousedown", function (e) { start = xAt(e); brush.setAttribute("display", ""); e.preventDefault(); });
    hit.addEventListener("mousemove", function (e) {
      var px = xAt(e);
      if (start !== null) {
        brush.setAttribute("x", Math.min(start, px)); brush.setAttribute("width", Math.abs(px - start));
      }
      var t = atTime(px), lines = [new Date(t).toISOString().slice(0, 19).replace("T", " ") + " UTC"];
      spec.series.forEach(function (s) {
        var best = null;
        s.points.forEach(function (p) { if (best === null || Math.abs(p[0] - t) < Math.abs(best[0] - t)) { best = p; } });
        if (best && best[1] !== null) { lines.push(s.name + ": " + fmt(best[1]) + (spec.unit ? " " + spec.unit : "")); }
      });
      cursor.setAttribute("x1", px); cursor.setAttribute("x2", px); cursor.setAttribute("display", "");
      showTip(e, lines);
    });
    function finish(e) {
      if (start === null) { return; }
      var a = atTime(start), b = atTime(xAt(e));
      start = null;
      brush.setAttribute("display", "none");
      if (Math.abs(b - a) > (x1 - x0) / 200) { view.set(Math.min(a, b), Math.max(a, b)); }
    }
    hit.addEventListener("mouseup", finish);
    hit.addEventListener("mouseleave", function (e) { finish(e); hideTip(); cursor.setAttribute("display", "none"); });
    hit.addEventListener("dblclick", function () { view.reset(); });
    return f.svg;
  }

  function parallel(box, spec) {
    var f = frame(box, spec), axesN = spec.axes.length;
    var step = f.w / Math.max(1, axesN - 1);
    var g = sv("g", {"class": "axes"});
    var ys = spec.axes.map(function (a) { return scale(a.min, a.max, M.t + f.h, M.t + 14); });
    spec.lines.forEach(function (line) {
      var d = "";
      line.values.forEach(function (v, i) {
        if (v === null) { return; }
        d += (d ? "L" : "M") + (M.l + i * step).toFixed(1) + "," + ys[i](v).toFixed(1);
      });
      var p = sv("path", {d: d, fill: "none", stroke: STATE_COLOURS[line.state] || "#8c8c8c", "stroke-opacity": 0.55,
                          "stroke-width": 1.4, "class": "pline"});
      p.addEventListener("mousemove", function (e) {
        showTip(e, [line.label, "state: " + line.state].concat(spec.axes.map(function (a, i) {
          return a.name + ": " + (line.text[i] === null ? "–" : line.text[i]);
        })));
        p.setAttribute("stroke-width", 3.2);
      });
      p.addEventListener("mouseleave", function () { hideTip(); p.setAttribute("stroke-width", 1.4); });
      f.svg.appendChild(p);
    });
    spec.axes.forEach(function (a, i) {
      var x = M.l + i * step;
      g.appendChild(sv("line", {x1: x, x2: x, y1: M.t + 14, y2: M.t + f.h, "class": "paxis"}));
      g.appendChild(sv("text", {x: x, y: M.t + 8, "text-anchor": "middle", "class": "label"}, a.name));
      (a.labels || [[a.min, fmt(a.min)], [a.max, fmt(a.max)]]).forEach(function (t) {
        g.appendChild(sv("text", {x: x + 4, y: ys[i](t[0]) + 4}, t[1]));
      });
    });
    f.svg.appendChild(g);
    return f.svg;
  }

  var KINDS = {bars: bars, hbars: hbars, density: density, scatter: scatter, lines: lines, parallel: parallel};

  function renderChart(spec, box) {
    var holder = el("div", {"class": "chart"});
    box.appendChild(el("h3", {}, spec.title));
    var tools = null, view = null;
    if (spec.kind === "lines") {
      tools = el("div", {"class": "charttools"});
      var reset = el("button", {type: "button", "data-reset": spec.name}, "reset zoom");
      tools.appendChild(el("span", {"class": "note"}, "drag across the chart to zoom in, double-click to zoom out"));
      tools.appendChild(reset);
      box.appendChild(tools);
      view = {x0: spec.x_range[0], x1: spec.x_range[1],
              set: function (a, b) { view.x0 = a; view.x1 = b; draw(); },
              reset: function () { view.x0 = spec.x_range[0]; view.x1 = spec.x_range[1]; draw(); }};
      reset.addEventListener("click", view.reset);
    }
    box.appendChild(holder);
    if (spec.note) { box.appendChild(el("p", {"class": "note"}, spec.note)); }
    function draw() {
      holder.textContent = "";
      holder.appendChild(KINDS[spec.kind](holder, spec, view));
      if (view) { holder.setAttribute("data-view", view.x0 + "," + view.x1); }
    }
    draw();
    var last = holder.clientWidth;
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        if (Math.abs(holder.clientWidth - last) > 8) { last = holder.clientWidth; draw(); }
      }).observe(holder);
    }
  }

  // --------------------------------------------------------------------------------------------- page
  var main = document.querySelector("main");
  data.sections.forEach(function (section) {
    var s = el("section", {id: section.key});
    s.appendChild(el("h2", {}, section.heading));
    main.appendChild(s);  // in the page first: the charts take the width they are given
    if (section.notes) { section.notes.forEach(function (n) { s.appendChild(el("p", {"class": "note"}, n)); }); }
    if (section.charts.length) {
      var grid = el("div", {"class": "charts"});
      s.appendChild(grid);
      section.charts.forEach(function (spec) {
        var cell = el("div", {"class": spec.wide ? "cell wide" : "cell"});
        grid.appendChild(cell);
        renderChart(spec, cell);
      });
    }
    section.tables.forEach(function (spec) {
      var box = el("div", {"class": "tablebox"});
      box.appendChild(el("h3", {}, spec.heading));
      s.appendChild(box);
      renderTable(spec, box);
    });
  });
  window.hpcjobsReport = {ready: true, renderMs: performance.now() - t0};
  document.documentElement.setAttribute("data-ready", "1");
})();
