/* The field-strategy configuration page (JSON comparison): add/remove fields, save, delete,
   import a JSON file, export. Talks to /api/field-strategies; builds every element with
   createElement/textContent (field names are user text, never parsed as HTML). */
(function () {
  "use strict";

  var NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$/;
  var data = JSON.parse(document.getElementById("page-data").textContent);
  var STRATEGIES = data.strategies;

  var nameInput = document.getElementById("config-name");
  var body = document.getElementById("fields-body");
  var statusLine = document.getElementById("config-status");
  var exportLink = document.getElementById("export-config");
  var tokenInput = document.getElementById("api-token");
  var saved = null; // name of the config shown, once it exists on the server

  if (tokenInput) {
    tokenInput.value = sessionStorage.getItem("assay-token") || "";
    tokenInput.addEventListener("change", function () {
      sessionStorage.setItem("assay-token", tokenInput.value);
    });
  }

  function setStatus(text, kind) {
    statusLine.textContent = text;
    statusLine.className = "status-line " + (kind || "");
  }

  function headers(json) {
    var h = {};
    if (json) h["Content-Type"] = "application/json";
    if (tokenInput && tokenInput.value) h["Authorization"] = "Bearer " + tokenInput.value;
    return h;
  }

  function detailOf(payload) {
    if (!payload || payload.detail === undefined) return "request failed";
    var d = payload.detail;
    if (typeof d === "string") return d;
    if (Array.isArray(d)) {
      return d.map(function (e) { return typeof e === "string" ? e : (e.loc || []).join(".") + ": " + e.msg; }).join("; ");
    }
    return JSON.stringify(d);
  }

  function call(method, url, payload, raw) {
    var init = { method: method, headers: headers(payload !== undefined) };
    if (payload !== undefined) init.body = raw ? payload : JSON.stringify(payload);
    return fetch(url, init).then(function (resp) {
      if (resp.status === 204) return null;
      return resp.json().catch(function () { return {}; }).then(function (json) {
        if (!resp.ok) {
          var err = new Error(detailOf(json));
          err.status = resp.status;
          throw err;
        }
        return json;
      });
    });
  }

  function url(name, suffix) {
    return "/api/field-strategies/" + encodeURIComponent(name) + (suffix || "");
  }

  function addRow(field, strategy) {
    var tr = document.createElement("tr");
    tr.className = "field-row";
    var td1 = document.createElement("td");
    var input = document.createElement("input");
    input.type = "text";
    input.className = "field-name";
    input.placeholder = "field path, e.g. customer_name";
    input.value = field || "";
    td1.appendChild(input);
    var td2 = document.createElement("td");
    var select = document.createElement("select");
    select.className = "field-strategy";
    STRATEGIES.forEach(function (s) {
      var opt = document.createElement("option");
      opt.value = s;
      opt.textContent = s;
      select.appendChild(opt);
    });
    select.value = strategy || "EXACT";
    td2.appendChild(select);
    var td3 = document.createElement("td");
    var remove = document.createElement("button");
    remove.type = "button";
    remove.className = "remove-field";
    remove.textContent = "Remove";
    remove.addEventListener("click", function () { tr.remove(); });
    td3.appendChild(remove);
    tr.appendChild(td1);
    tr.appendChild(td2);
    tr.appendChild(td3);
    body.appendChild(tr);
    return input;
  }

  function show(name, strategies) {
    nameInput.value = name || "";
    while (body.firstChild) body.removeChild(body.firstChild);
    Object.keys(strategies || {}).forEach(function (field) { addRow(field, strategies[field]); });
    saved = name || null;
    updateExport();
  }

  function updateExport() {
    if (saved) {
      exportLink.href = url(saved, "/export");
      exportLink.setAttribute("download", saved + ".json");
      exportLink.classList.remove("disabled");
    } else {
      exportLink.href = "#";
      exportLink.classList.add("disabled");
    }
  }

  function collect() {
    var out = {};
    var rows = body.querySelectorAll("tr.field-row");
    for (var i = 0; i < rows.length; i++) {
      var field = rows[i].querySelector(".field-name").value.trim();
      var strategy = rows[i].querySelector(".field-strategy").value;
      if (!field) continue;
      if (Object.prototype.hasOwnProperty.call(out, field)) {
        throw new Error("field '" + field + "' is listed twice");
      }
      out[field] = strategy;
    }
    return out;
  }

  function currentName() {
    var name = nameInput.value.trim();
    if (!NAME_RE.test(name)) {
      throw new Error("name: use letters, digits, '_', '.', '-' (up to 128 characters)");
    }
    return name;
  }

  function renderList(configs) {
    var list = document.getElementById("config-list");
    while (list.firstChild) list.removeChild(list.firstChild);
    if (!configs.length) {
      var li = document.createElement("li");
      li.className = "muted";
      li.textContent = "none yet";
      list.appendChild(li);
      return;
    }
    configs.forEach(function (c) {
      var li = document.createElement("li");
      var a = document.createElement("a");
      a.href = "#";
      a.setAttribute("data-config", c.name);
      a.textContent = c.name;
      var count = document.createElement("span");
      count.className = "muted";
      count.textContent = " " + Object.keys(c.strategies).length + " field(s)";
      li.appendChild(a);
      li.appendChild(count);
      list.appendChild(li);
    });
  }

  function refreshList() {
    return call("GET", "/api/field-strategies").then(renderList);
  }

  document.getElementById("config-list").addEventListener("click", function (ev) {
    var target = ev.target.closest("a[data-config]");
    if (!target) return;
    ev.preventDefault();
    var name = target.getAttribute("data-config");
    call("GET", url(name)).then(function (cfg) {
      show(cfg.name, cfg.strategies);
      setStatus("Loaded '" + cfg.name + "'.", "ok");
    }).catch(function (err) { setStatus(err.message, "error"); });
  });

  document.getElementById("new-config").addEventListener("click", function () {
    show("", {});
    addRow("", "EXACT").focus();
    nameInput.focus();
    setStatus("New configuration: name it, add fields, save.", "");
  });

  document.getElementById("add-field").addEventListener("click", function () {
    addRow("", "EXACT").focus();
  });

  document.getElementById("save-config").addEventListener("click", function () {
    var name, strategies;
    try {
      name = currentName();
      strategies = collect();
    } catch (err) {
      setStatus(err.message, "error");
      return;
    }
    call("PUT", url(name), { strategies: strategies }).then(function (cfg) {
      show(cfg.name, cfg.strategies);
      return refreshList().then(function () {
        setStatus("Saved '" + cfg.name + "' (" + Object.keys(cfg.strategies).length + " fields).", "ok");
      });
    }).catch(function (err) { setStatus("Not saved: " + err.message, "error"); });
  });

  document.getElementById("delete-config").addEventListener("click", function () {
    var name;
    try { name = currentName(); } catch (err) { setStatus(err.message, "error"); return; }
    if (!window.confirm("Delete the configuration '" + name + "'?")) return;
    call("DELETE", url(name)).then(function () {
      show("", {});
      return refreshList().then(function () { setStatus("Deleted '" + name + "'.", "ok"); });
    }).catch(function (err) { setStatus("Not deleted: " + err.message, "error"); });
  });

  exportLink.addEventListener("click", function (ev) {
    if (!saved) {
      ev.preventDefault();
      setStatus("Save the configuration before exporting it.", "error");
    }
  });

  var fileInput = document.getElementById("import-file");
  fileInput.addEventListener("change", function () {
    var file = fileInput.files && fileInput.files[0];
    if (!file) return;
    var name = nameInput.value.trim();
    if (!name) {
      name = file.name.replace(/\.json$/i, "").replace(/[^A-Za-z0-9_.\-]/g, "_").replace(/^[^A-Za-z0-9]+/, "");
      nameInput.value = name;
    }
    if (!NAME_RE.test(name)) {
      setStatus("name: use letters, digits, '_', '.', '-' (up to 128 characters)", "error");
      fileInput.value = "";
      return;
    }
    file.text().then(function (text) {
      return call("POST", url(name, "/import"), text, true);
    }).then(function (cfg) {
      show(cfg.name, cfg.strategies);
      return refreshList().then(function () {
        setStatus("Imported " + cfg.fields + " field(s) into '" + cfg.name + "'.", "ok");
      });
    }).catch(function (err) {
      setStatus("Not imported: " + err.message, "error");
    }).then(function () { fileInput.value = ""; });
  });

  renderList(data.configs);
  updateExport();
  document.body.setAttribute("data-ready", "true");
})();
