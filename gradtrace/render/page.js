// gradtrace's interactive page (MIT, part of gradtrace): pan, zoom, search, details.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("gt-data").textContent);
  var view = document.getElementById("gt-view");
  var svg = view.querySelector("svg");
  var panel = document.getElementById("gt-panel");
  var details = document.getElementById("gt-details");
  var search = document.getElementById("gt-search");
  var count = document.getElementById("gt-count");
  var passSelect = document.getElementById("gt-pass");
  var boxes = data.boxes;
  var selected = null, hits = [], hitAt = -1;

  // --- the view box: pan and zoom -----------------------------------------------------
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  var full = svg.viewBox.baseVal;
  var home = { x: full.x, y: full.y, w: full.width, h: full.height };
  var box = { x: home.x, y: home.y, w: home.w, h: home.h };
  function apply() { svg.setAttribute("viewBox", box.x + " " + box.y + " " + box.w + " " + box.h); }
  function fit() { box = { x: home.x, y: home.y, w: home.w, h: home.h }; apply(); }
  function scale() {  // svg units per screen pixel (preserveAspectRatio: meet)
    var r = view.getBoundingClientRect();
    return Math.max(box.w / Math.max(r.width, 1), box.h / Math.max(r.height, 1));
  }
  function zoom(factor, cx, cy) {  // factor > 1 zooms in, around (cx, cy) in svg units
    if (cx === undefined) { cx = box.x + box.w / 2; cy = box.y + box.h / 2; }
    var w = box.w / factor, h = box.h / factor;
    if (w < 10 || w > home.w * 20) return;
    box = { x: cx - (cx - box.x) / factor, y: cy - (cy - box.y) / factor, w: w, h: h };
    apply();
  }
  function toSvg(event) {
    var p = svg.createSVGPoint();
    p.x = event.clientX; p.y = event.clientY;
    return p.matrixTransform(svg.getScreenCTM().inverse());
  }
  function pan(dx, dy) { box.x += dx; box.y += dy; apply(); }
  function centre(element) {
    var b = element.getBBox(), m = element.getCTM(), r = svg.getCTM().inverse().multiply(m);
    var p = svg.createSVGPoint(); p.x = b.x + b.width / 2; p.y = b.y + b.height / 2;
    p = p.matrixTransform(r);
    box.x = p.x - box.w / 2; box.y = p.y - box.h / 2; apply();
  }
  view.addEventListener("wheel", function (event) {
    event.preventDefault();
    var p = toSvg(event);
    zoom(event.deltaY < 0 ? 1.2 : 1 / 1.2, p.x, p.y);
  }, { passive: false });
  var drag = null;
  view.addEventListener("pointerdown", function (event) {
    if (event.button !== 0) return;
    drag = { x: event.clientX, y: event.clientY, moved: false };
  });
  window.addEventListener("pointermove", function (event) {
    if (!drag) return;
    var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    drag.moved = true; view.classList.add("gt-dragging");
    var s = scale();
    pan(-dx * s, -dy * s);
    drag.x = event.clientX; drag.y = event.clientY;
  });
  window.addEventListener("pointerup", function () {
    view.classList.remove("gt-dragging");
    setTimeout(function () { drag = null; }, 0);
  });
  document.getElementById("gt-zoom-in").onclick = function () { zoom(1.5); };
  document.getElementById("gt-zoom-out").onclick = function () { zoom(1 / 1.5); };
  document.getElementById("gt-fit").onclick = fit;

  // --- boxes: select, details -----------------------------------------------------------
  var groups = {};  // box id -> its <g>
  svg.querySelectorAll("g.node").forEach(function (g) {
    if (!boxes[g.id]) return;  // the legend
    groups[g.id] = g;
    g.setAttribute("tabindex", "0");
    g.setAttribute("role", "button");
    g.setAttribute("aria-label", boxes[g.id].label.join(" "));
    g.addEventListener("click", function (event) {
      if (drag && drag.moved) return;
      event.stopPropagation();
      select(g.id);
    });
    g.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); select(g.id); }
    });
  });
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  var NON_FINITE = /(^|[^\w.])(-?(?:nan|inf))(?![\w.])/g;
  function numberCell(text) {  // a cell whose nan, inf and -inf stand out in red
    var td = el("td"), at = 0, m;
    text = String(text);
    NON_FINITE.lastIndex = 0;
    while ((m = NON_FINITE.exec(text)) !== null) {
      var start = m.index + m[1].length;
      td.appendChild(document.createTextNode(text.slice(at, start)));
      td.appendChild(el("span", m[2], "gt-nonfinite-text"));
      at = start + m[2].length;
    }
    td.appendChild(document.createTextNode(text.slice(at)));
    return td;
  }
  function row(table, key, value) {
    if (value === null || value === undefined || value === "") return;
    var tr = el("tr"); tr.appendChild(el("td", key)); tr.appendChild(numberCell(value));
    table.appendChild(tr);
  }
  function nodeTable(n) {
    var t = el("table");
    row(t, "type", n.type);
    row(t, "id", n.id);
    row(t, "tensor", n.tensor ? n.tensor + (n.shape ? "  " + n.shape : "") : null);
    row(t, "module", n.module);
    if (n.source) row(t, "line", n.source.file.split("/").pop() + ":" + n.source.line + "  " + n.source.code);
    if (n.library) row(t, "then", n.library.file.split("/").pop() + ":" + n.library.line + "  " + n.library.code);
    n.saved.forEach(function (s) { row(t, "saved " + s[0], s[1] + "  " + s[2]); });
    if (n.cost) row(t, "backward cost", n.cost);
    var p = Number(passSelect.value);
    var g = n.grads[p];
    if (data.passes.length) {
      if (g) {
        row(t, "received", g[0]);
        g[1].forEach(function (sent, i) { row(t, "sent [" + i + "]", sent); });
      } else {
        row(t, "gradient", "none in pass " + (p + 1));
      }
    }
    return t;
  }
  function showMembers(b, list, button) {
    list.textContent = "";
    b.nodes.forEach(function (n) {
      var m = el("div", null, "gt-member");
      m.appendChild(nodeTable(n));
      list.appendChild(m);
    });
    if (b.count > b.nodes.length) list.appendChild(el("p", "… and " + (b.count - b.nodes.length) + " more nodes (gradtrace show --json lists them all)"));
    button.textContent = "Collapse";
    button.setAttribute("aria-expanded", "true");
  }
  function render(id) {
    var b = boxes[id];
    details.textContent = "";
    details.appendChild(el("h2", (b.mark ? b.label.slice(0, -1) : b.label).join(" · ")));
    if (b.mark) details.appendChild(el("p", b.mark.note, "gt-mark-note"));
    if (b.cluster) details.appendChild(el("p", "in module " + b.cluster));
    if (b.kind === "folded") {
      details.appendChild(el("p", b.count + " nodes folded into this box"));
      var button = el("button", "Expand", "gt-expand");
      button.setAttribute("aria-expanded", "false");
      var list = el("div", null, "gt-members");
      button.onclick = function () {
        if (button.getAttribute("aria-expanded") === "true") {
          list.textContent = ""; button.textContent = "Expand";
          button.setAttribute("aria-expanded", "false");
        } else {
          showMembers(b, list, button);
        }
      };
      details.appendChild(button);
      details.appendChild(list);
    } else if (b.nodes.length) {
      details.appendChild(nodeTable(b.nodes[0]));
    } else {
      details.appendChild(el("p", b.kind === "output" ? "an output (root) tensor" : b.kind));
    }
  }
  function select(id) {
    if (selected && groups[selected]) groups[selected].classList.remove("gt-selected");
    selected = id;
    groups[id].classList.add("gt-selected");
    panel.hidden = false;
    render(id);
  }
  function close() {
    if (selected && groups[selected]) groups[selected].classList.remove("gt-selected");
    selected = null; panel.hidden = true;
  }
  document.getElementById("gt-close").onclick = close;
  data.passes.forEach(function (label, i) {
    var o = el("option", label); o.value = String(i); passSelect.appendChild(o);
  });
  if (!data.passes.length) document.getElementById("gt-pass-label").hidden = true;
  else passSelect.value = String(data.passes.length - 1);
  passSelect.onchange = function () { if (selected) render(selected); };

  // --- search ----------------------------------------------------------------------------
  var index = {};
  Object.keys(boxes).forEach(function (id) {
    var b = boxes[id], words = b.label.concat([id, b.cluster || ""]);
    b.nodes.forEach(function (n) {
      words.push(n.id, n.type, n.tensor || "", n.module || "");
      for (const s of [n.source, n.library]) if (s) words.push("line " + s.line, s.file.split("/").pop() + ":" + s.line, s.code);
    });
    index[id] = words.join("\n").toLowerCase();
  });
  function find(text) {
    Object.keys(groups).forEach(function (id) { groups[id].classList.remove("gt-hit"); });
    var q = text.trim().toLowerCase();
    hits = q ? Object.keys(groups).filter(function (id) { return index[id].indexOf(q) >= 0; }) : [];
    hitAt = -1;
    hits.forEach(function (id) { groups[id].classList.add("gt-hit"); });
    svg.classList.toggle("gt-searching", q.length > 0);
    count.textContent = q ? hits.length + (hits.length === 1 ? " match" : " matches") : "";
  }
  function nextHit(step) {
    if (!hits.length) return;
    hitAt = (hitAt + step + hits.length) % hits.length;
    centre(groups[hits[hitAt]]);
    select(hits[hitAt]);
  }
  search.addEventListener("input", function () { find(search.value); });
  search.addEventListener("keydown", function (event) {
    if (event.key === "Enter") { event.preventDefault(); nextHit(event.shiftKey ? -1 : 1); }
    if (event.key === "Escape") { search.value = ""; find(""); view.focus(); }
  });

  // --- module clusters fold and unfold ----------------------------------------------------
  var edges = [];
  svg.querySelectorAll("g.edge").forEach(function (g) {
    var ends = g.id.split("->");
    edges.push({ g: g, src: ends[0], dst: ends[1] });
  });
  function inside(boxId, path) {
    var c = boxes[boxId] && boxes[boxId].cluster;
    return !!c && (c === path || c.indexOf(path + ".") === 0);
  }
  function refold() {
    var folded = [];
    svg.querySelectorAll("g.cluster.gt-collapsed").forEach(function (c) { folded.push(c.id.slice(8)); });
    var hidden = {};
    Object.keys(groups).forEach(function (id) {
      var h = folded.some(function (path) { return inside(id, path); });
      hidden[id] = h;
      groups[id].classList.toggle("gt-hidden", h);
    });
    edges.forEach(function (e) { e.g.classList.toggle("gt-hidden", !!(hidden[e.src] || hidden[e.dst])); });
    svg.querySelectorAll("g.cluster").forEach(function (c) {
      var path = c.id.slice(8);
      var within = folded.some(function (p) { return path !== p && path.indexOf(p + ".") === 0; });
      c.classList.toggle("gt-hidden", within);
    });
  }
  svg.querySelectorAll("g.cluster").forEach(function (c) {
    if (c.id.indexOf("cluster_") !== 0) return;  // the legend
    var label = c.querySelector("text");
    if (!label) return;
    label.setAttribute("tabindex", "0");
    label.setAttribute("role", "button");
    label.setAttribute("aria-label", "fold or unfold module " + c.id.slice(8));
    function toggle(event) {
      if (drag && drag.moved) return;
      event.stopPropagation();
      c.classList.toggle("gt-collapsed");
      refold();
    }
    label.addEventListener("click", toggle);
    label.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(event); }
    });
  });

  // --- the steps of a training loop: gradient norm per module, the loss -------------------
  var steps = data.steps;
  var stepsPanel = document.getElementById("gt-steps");
  var stepsToggle = document.getElementById("gt-steps-toggle");
  var COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31"];
  var SVGNS = "http://www.w3.org/2000/svg";
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function drawable(v, log) { return typeof v === "number" && (!log || v > 0); }
  // a plot of lines (each {values, colour, name}) over steps.x; log: a log10 y axis
  function plot(lines, log, height, title) {
    var W = 440, L = 44, R = 8, T = 18, B = 18, H = height;
    var chart = svgEl("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title });
    var ys = [];
    lines.forEach(function (l) { l.values.forEach(function (v) { if (drawable(v, log)) ys.push(log ? Math.log10(v) : v); }); });
    var lo = ys.length ? Math.min.apply(null, ys) : 0, hi = ys.length ? Math.max.apply(null, ys) : 1;
    if (log) { lo = Math.floor(lo); hi = Math.ceil(hi); }
    if (hi - lo < 1e-12) { lo -= 1; hi += 1; }
    var n = steps.passes;
    function x(p) { return n > 1 ? L + (p - 1) / (n - 1) * (W - L - R) : (L + W - R) / 2; }
    function y(v) { return T + (hi - (log ? Math.log10(v) : v)) / (hi - lo) * (H - T - B); }
    chart.appendChild(svgEl("text", { x: L, y: 11, "font-weight": "bold" }, title));
    var ticks = [];
    if (log) { var every = Math.max(1, Math.ceil((hi - lo) / 5)); for (var k = lo; k <= hi; k += every) ticks.push(Math.pow(10, k)); }
    else { for (var i = 0; i <= 4; i++) ticks.push(lo + (hi - lo) * i / 4); }
    ticks.forEach(function (t) {
      chart.appendChild(svgEl("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), stroke: "#eceff1" }));
      chart.appendChild(svgEl("text", { x: L - 4, y: y(t) + 3, "text-anchor": "end", "class": "gt-tick" }, Number(t.toPrecision(3))));
    });
    chart.appendChild(svgEl("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#90a4ae" }));
    chart.appendChild(svgEl("text", { x: L, y: H - 4 }, "pass 1"));
    chart.appendChild(svgEl("text", { x: W - R, y: H - 4, "text-anchor": "end" }, "pass " + n.toLocaleString("en")));
    lines.forEach(function (l) {
      var pts = [], bad = [];
      l.values.forEach(function (v, i) {
        if (typeof v === "string") bad.push(x(steps.x[i]));
        else if (drawable(v, log)) pts.push(x(steps.x[i]).toFixed(1) + "," + y(v).toFixed(1));
      });
      var g = svgEl("g", { "class": "gt-series", "data-name": l.name });
      g.appendChild(svgEl("title", {}, l.name));
      g.appendChild(svgEl("polyline", { "class": "gt-line", points: pts.join(" "), stroke: l.colour }));
      g.appendChild(svgEl("polyline", { "class": "gt-line-hit", points: pts.join(" ") }));
      bad.forEach(function (bx) {
        g.appendChild(svgEl("path", { d: "M" + (bx - 3) + "," + (T + 1) + " l6,6 M" + (bx - 3) + "," + (T + 7) + " l6,-6", stroke: "#d62728", "class": "gt-nonfinite" }));
      });
      if (l.pick) g.addEventListener("click", function (event) { event.stopPropagation(); l.pick(); });
      chart.appendChild(g);
    });
    return chart;
  }
  function inModule(n, s) {
    return (n.module && (n.module === s.name || n.module.indexOf(s.name + ".") === 0)) ||
      (n.tensor !== null && s.leaves.indexOf(n.tensor) >= 0);
  }
  var picked = null;
  function pickModule(s) {
    var ids = Object.keys(groups).filter(function (id) {
      return boxes[id].nodes.some(function (n) { return inModule(n, s); });
    });
    search.value = "";
    find("");  // clears the search's marks; the module's boxes are marked the same way
    hits = ids; hitAt = -1;
    ids.forEach(function (id) { groups[id].classList.add("gt-hit"); });
    svg.classList.toggle("gt-searching", true);
    count.textContent = ids.length + (ids.length === 1 ? " box in " : " boxes in ") + s.name;
    picked = s.name;
    stepsPanel.querySelectorAll("#gt-steps-chart .gt-series").forEach(function (g) {
      g.classList.toggle("gt-active", g.getAttribute("data-name") === s.name);
      g.classList.toggle("gt-dim", g.getAttribute("data-name") !== s.name);
    });
    stepsPanel.querySelectorAll("#gt-steps-legend button").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-name") === s.name));
    });
    if (ids.length) { centre(groups[ids[0]]); select(ids[0]); hitAt = 0; }
  }
  function showSteps(on) {
    stepsPanel.hidden = !on;
    stepsToggle.setAttribute("aria-pressed", String(on));
  }
  if (steps) {
    document.getElementById("gt-steps-title").textContent = "steps · " +
      steps.passes.toLocaleString("en") + " passes, " + steps.optimizer_steps.toLocaleString("en") + " optimizer steps";
    var lines = steps.series.map(function (s, i) {
      return { name: s.name, values: s.values, colour: COLOURS[i % COLOURS.length], pick: function () { pickModule(s); } };
    });
    document.getElementById("gt-steps-chart").appendChild(plot(lines, true, 240, "gradient norm per module (log)"));
    if (steps.loss) {
      var numbers = steps.loss.filter(function (v) { return typeof v === "number"; });
      var log = numbers.length > 0 && numbers.every(function (v) { return v > 0; });
      document.getElementById("gt-steps-loss").appendChild(plot([{ name: "loss", values: steps.loss, colour: "#263238" }], log, 110, "loss" + (log ? " (log)" : "")));
    }
    var legend = document.getElementById("gt-steps-legend");
    steps.series.forEach(function (s, i) {
      var li = el("li"), b = el("button");
      b.setAttribute("data-name", s.name);
      b.setAttribute("aria-pressed", "false");
      var swatch = el("span", null, "gt-swatch");
      swatch.style.background = COLOURS[i % COLOURS.length];
      b.appendChild(swatch);
      b.appendChild(el("span", s.name));
      if (s.first_bad !== null) b.appendChild(el("span", "! not finite from pass " + s.first_bad, "gt-bad"));
      b.onclick = function () { pickModule(s); };
      li.appendChild(b); legend.appendChild(li);
    });
    stepsToggle.hidden = false;
    stepsToggle.onclick = function () { showSteps(stepsPanel.hidden); fit(); };
    showSteps(true);
  }

  // --- findings: each one selects the box of the node it names -----------------------------
  var findingsPanel = document.getElementById("gt-findings");
  var findingsToggle = document.getElementById("gt-findings-toggle");
  function reveal(id) {  // unfold the module clusters that hide a box
    svg.querySelectorAll("g.cluster.gt-collapsed").forEach(function (c) {
      if (inside(id, c.id.slice(8))) c.classList.remove("gt-collapsed");
    });
    refold();
  }
  function showFindings(on) {
    findingsPanel.hidden = !on;
    findingsToggle.setAttribute("aria-pressed", String(on));
  }
  if (data.findings.length) {
    document.getElementById("gt-findings-title").textContent = "findings (" + data.findings.length + ")";
    var findingsList = document.getElementById("gt-findings-list");
    data.findings.forEach(function (f, i) {
      var li = el("li"), b = el("button");
      b.setAttribute("data-code", f.code);
      b.setAttribute("aria-pressed", "false");
      b.appendChild(el("span", f.severity, "gt-sev gt-sev-" + f.severity));
      b.appendChild(el("span", "[" + f.code + "]", "gt-code"));
      if (f.where) b.appendChild(el("span", f.where, "gt-where"));
      b.appendChild(el("span", f.message, "gt-message"));
      if (f.hint) b.appendChild(el("span", "hint: " + f.hint, "gt-hint"));
      if (f.box && groups[f.box]) {
        b.title = "Select its node (" + f.box + ")";
        b.onclick = function () {
          findingsList.querySelectorAll("button").forEach(function (o) { o.setAttribute("aria-pressed", "false"); });
          b.setAttribute("aria-pressed", "true");
          reveal(f.box); centre(groups[f.box]); select(f.box);
        };
      } else {
        b.disabled = true;  // it names no drawn node
      }
      li.appendChild(b); findingsList.appendChild(li);
    });
    findingsToggle.hidden = false;
    findingsToggle.textContent = "Findings (" + data.findings.length + ")";
    findingsToggle.onclick = function () { showFindings(findingsPanel.hidden); };
    showFindings(true);
  }

  // --- keyboard ---------------------------------------------------------------------------
  document.addEventListener("keydown", function (event) {
    if (event.target === search || event.ctrlKey || event.metaKey || event.altKey) return;
    var step = box.w / 10;
    var keys = {
      "/": function () { search.focus(); search.select(); },
      "+": function () { zoom(1.5); }, "=": function () { zoom(1.5); },
      "-": function () { zoom(1 / 1.5); }, "0": fit, "f": fit,
      "ArrowLeft": function () { pan(-step, 0); }, "ArrowRight": function () { pan(step, 0); },
      "ArrowUp": function () { pan(0, -step); }, "ArrowDown": function () { pan(0, step); },
      "n": function () { nextHit(1); }, "N": function () { nextHit(-1); },
      "Escape": close
    };
    if (keys[event.key]) { event.preventDefault(); keys[event.key](); }
  });
  fit();
  document.body.setAttribute("data-ready", "1");  // for tests: the page is interactive
})();
