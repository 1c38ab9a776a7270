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
  function row(table, key, value) {
    if (value === null || value === undefined || value === "") return;
    var tr = el("tr"); tr.appendChild(el("td", key)); tr.appendChild(el("td", value));
    table.appendChild(tr);
  }
  function nodeTable(n) {
    var t = el("table");
    row(t, "type", n.type);
    row(t, "id", n.id);
    row(t, "tensor", n.tensor ? n.tensor + (n.shape ? "  " + n.shape : "") : null);
    row(t, "module", n.module);
    if (n.source) row(t, "line", n.source.file.split("/").pop() + ":" + n.source.line + "  " + n.source.code);
    n.saved.forEach(function (s) { row(t, "saved " + s[0], s[1] + "  " + s[2]); });
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
    details.appendChild(el("h2", b.label.join(" · ")));
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
      if (n.source) words.push("line " + n.source.line, n.source.file.split("/").pop() + ":" + n.source.line, n.source.code);
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
