/* The annotation queue (page /runs/<id>/label): shows one sample at a time without the
   metric's value, takes a verdict by key (1/0 or a scale's digits, s to skip, u to undo),
   posts it to /api/runs/<id>/labels and shows the next sample at once from the ones
   fetched ahead. Every text is set with textContent (samples, notes and names are user
   text, never parsed as HTML). window.__queueSwitchMs collects, per answer, the time from
   the key to the next sample painted, whether it was fetched ahead or had to wait for
   the server. */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("page-data").textContent);
  var base = "/api/runs/" + encodeURIComponent(data.run_id);
  var verdictKeys = data.points ? data.points.map(String) : ["1", "0"];
  var AHEAD = 5; // samples fetched ahead: the next one shows without waiting for the server

  var el = function (id) { return document.getElementById(id); };
  var nameInput = el("annotator-name");
  var tokenInput = el("api-token");
  var noteInput = el("note");
  var queueBox = el("queue");
  var statusLine = el("queue-status");

  var state = {
    annotator: null,
    current: null,
    ahead: [],       // the next samples, fetched ahead
    skipped: [],     // indices skipped: the server puts them last
    done: {},        // indices answered here (left out of replies until undone)
    history: [],     // the labels stored here, for undo
    chain: Promise.resolve(),
    refilling: false,
    again: false,
    waitingSince: undefined
  };
  window.__queueSwitchMs = [];

  if (tokenInput) {
    tokenInput.value = sessionStorage.getItem("assay-token") || "";
    tokenInput.addEventListener("change", function () {
      sessionStorage.setItem("assay-token", tokenInput.value);
    });
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
    if (Array.isArray(d)) return d.map(function (e) { return e.msg || String(e); }).join("; ");
    return JSON.stringify(d);
  }

  function call(method, url, payload) {
    var init = { method: method, headers: headers(payload !== undefined) };
    if (payload !== undefined) init.body = JSON.stringify(payload);
    return fetch(url, init).then(function (resp) {
      if (resp.status === 204) return null;
      return resp.json().catch(function () { return {}; }).then(function (json) {
        if (!resp.ok) throw new Error(detailOf(json));
        return json;
      });
    });
  }

  function setStatus(text, kind) {
    statusLine.textContent = text;
    statusLine.className = kind === "error" ? "error" : "muted";
  }

  function text(id, value) {
    var node = el(id);
    node.textContent = value === null || value === undefined ? "N/A" : String(value);
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function add(parent, tag, cls, content) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (content !== undefined && content !== null) node.textContent = String(content);
    parent.appendChild(node);
    return node;
  }

  function json(value) {
    return value === undefined || value === null ? "" : JSON.stringify(value);
  }

  function renderContexts(contexts) {
    var list = el("item-context-list");
    clear(list);
    contexts.forEach(function (c) { add(list, "li", "text context-text", c); });
    el("item-contexts").hidden = contexts.length === 0;
  }

  function renderTurns(conversation) {
    var list = el("item-turns");
    clear(list);
    (conversation ? conversation.turns : []).forEach(function (t) {
      var li = add(list, "li", "turn");
      li.setAttribute("data-role", t.role);
      var msg = add(li, "div", "message");
      var head = add(msg, "div", "turn-head");
      add(head, "span", "turn-index", "#" + t.index);
      add(head, "span", "role", t.role);
      if (t.name) add(head, "span", "muted", t.name);
      if (t.content !== null && t.content !== undefined) add(msg, "div", "text turn-content", t.content);
      (t.tool_calls || []).forEach(function (c) {
        add(msg, "div", "tool-call mono", "calls " + c.name + "(" + json(c.arguments) + ")");
      });
    });
    el("item-conversation").hidden = !conversation;
  }

  function renderSteps(agent) {
    var list = el("item-steps");
    clear(list);
    (agent ? agent.steps : []).forEach(function (s) {
      var li = add(list, "li", "step");
      add(li, "span", "mono", s.kind + " " + (s.name || "") + "(" + json(s.arguments) + ")");
      add(li, "span", s.ok === false ? "bad" : "good", s.ok === false ? " failed" + (s.error ? ": " + s.error : "") : " ok");
      if (s.result !== null && s.result !== undefined) add(li, "div", "text step-result", typeof s.result === "string" ? s.result : json(s.result));
    });
    var reference = el("item-reference");
    reference.textContent = agent && agent.expected && agent.expected.length
      ? "reference calls: " + agent.expected.map(function (c) { return c.name + "(" + json(c.arguments) + ")"; }).join(", ")
      : "";
    el("item-agent").hidden = !agent;
  }

  function render(item) {
    var article = el("item");
    el("queue-done").hidden = item !== null;
    article.hidden = item === null;
    if (item === null) {
      article.setAttribute("data-index", "");
      return;
    }
    article.setAttribute("data-index", String(item.index));
    // a conversation or agent run without texts of its own shows its turns and steps only
    el("item-texts").hidden = (item.conversation || item.agent) &&
      item.query === null && item.response === null && item.expected === null;
    text("item-query", item.query);
    text("item-response", item.response);
    text("item-expected", item.expected);
    renderContexts(item.contexts || []);
    renderTurns(item.conversation);
    renderSteps(item.agent);
    noteInput.value = "";
  }

  function painted(startedAt) {
    // two animation frames: the time until the new sample has been painted
    requestAnimationFrame(function () {
      requestAnimationFrame(function () {
        window.__queueSwitchMs.push(performance.now() - startedAt);
      });
    });
  }

  function showNext(startedAt) {
    state.current = state.ahead.shift() || null;
    render(state.current);
    if (startedAt === undefined) return;
    if (state.current !== null) painted(startedAt);
    else state.waitingSince = startedAt; // the next sample comes with the server's reply
  }

  function describePlan(plan) {
    var parts = [
      "labelled " + plan.labelled + " of " + plan.total,
      plan.remaining + " to go",
      "order: " + plan.order_used
    ];
    if (plan.order_used === "uncertain" && plan.thresholds_used.length) {
      parts.push("around " + plan.thresholds_used.map(function (t) {
        return (t.value === null ? "no threshold" : Number(t.value).toPrecision(3)) + " (" + t.source + ", " + t.samples + " samples)";
      }).join(", "));
    }
    if (plan.no_value) parts.push(plan.no_value + " without a value left out");
    if (state.skipped.length) parts.push(state.skipped.length + " skipped (they come last)");
    return parts.join(" · ");
  }

  function queueUrl() {
    var params = new URLSearchParams();
    params.set("metric", data.metric);
    params.set("annotator", state.annotator);
    params.set("order", data.order);
    params.set("seed", String(data.seed));
    // the shown sample and those answered but not yet stored may head the reply
    var answering = Object.keys(state.done).length;
    params.set("limit", String(Math.min(10, AHEAD + 1 + answering)));
    state.skipped.forEach(function (i) { params.append("skip", String(i)); });
    return base + "/label-queue?" + params.toString();
  }

  function apply(plan) {
    var shown = state.current ? state.current.index : null;
    var fresh = plan.items.filter(function (it) {
      return it.index !== shown && !state.done[it.index];
    });
    // a sample skipped while this reply was on its way goes last, as the server puts it
    var skipped = function (it) { return state.skipped.indexOf(it.index) >= 0; };
    state.ahead = fresh.filter(function (it) { return !skipped(it); })
      .concat(fresh.filter(skipped));
    var note = el("order-note");
    note.hidden = !plan.note;
    note.textContent = plan.note || "";
    setStatus(describePlan(plan));
    if (state.current === null) {
      var since = state.waitingSince;
      state.waitingSince = undefined;
      showNext(since);
    }
  }

  // one queue request at a time, independent of the label writes (answered samples are
  // left out here until their write is done); a request asked for meanwhile follows it
  function refill() {
    if (state.refilling) {
      state.again = true;
      return;
    }
    state.refilling = true;
    call("GET", queueUrl()).then(apply).catch(function (err) {
      setStatus(err.message, "error");
    }).then(function () {
      state.refilling = false;
      if (state.again) {
        state.again = false;
        refill();
      }
    });
  }

  function agreementText(a) {
    var names = a.annotators.map(function (x) { return x.name + " (" + x.labels + ")"; }).join(", ");
    if (a.statistic === null) return "Annotators so far: " + (names || "none") + ". Agreement needs two annotators.";
    var label = a.statistic === "cohen_kappa" ? "Cohen's kappa" : "Fleiss' kappa";
    var value = a.value === null ? "undefined (one category only)" : a.value.toFixed(3);
    return label + " = " + value + " over n = " + a.n + " items labelled by more than one annotator; annotators: " + names + ".";
  }

  function refreshAgreement() {
    var params = new URLSearchParams({ metric: data.metric });
    call("GET", base + "/labels?" + params.toString()).then(function (reply) {
      var node = el("agreement-text");
      node.textContent = agreementText(reply.agreement);
      node.setAttribute("data-statistic", reply.agreement.statistic || "");
      node.setAttribute("data-value", reply.agreement.value === null ? "" : String(reply.agreement.value));
    }).catch(function (err) { setStatus(err.message, "error"); });
  }

  function showLast(reply, key) {
    var m = reply.metric;
    var said = data.points ? key : (key === "1" ? "1 (yes)" : "0 (no)");
    var value = m.value === null ? "N/A" : Number(m.value).toPrecision(3);
    var words = "#" + reply.label.index + ": you said " + said + "; " + m.name + " was " + value +
      (m.method ? " (" + m.method + ")" : "");
    if (m.threshold !== null) {
      words += ", threshold " + m.threshold + " (" + m.threshold_source + "): " + (m.agrees ? "it agrees" : "it disagrees");
    }
    el("last-answer").hidden = false;
    el("last-answer-text").textContent = words + ".";
  }

  // label writes and undos run one after another, in the order given
  function later(step) {
    state.chain = state.chain.then(step).catch(function (err) { setStatus(err.message, "error"); });
    return state.chain;
  }

  function answer(key) {
    var item = state.current;
    if (!item) return;
    var started = performance.now();
    if (key === "s") {
      if (state.skipped.indexOf(item.index) < 0) state.skipped.push(item.index);
      showNext(started);
      refill();
      return;
    }
    var note = noteInput.value.trim();
    state.done[item.index] = true;
    showNext(started);
    if (state.ahead.length < AHEAD - 1) refill();
    later(function () {
      var body = {
        metric: data.metric,
        index: item.index,
        label: parseInt(key, 10),
        annotator: state.annotator
      };
      if (note) body.note = note;
      if (data.scale) body.scale = data.scale;
      return call("POST", base + "/labels", body).then(function (reply) {
        state.skipped = state.skipped.filter(function (i) { return i !== item.index; });
        state.history.push({ id: reply.label.id, item: item });
        el("undo").disabled = false;
        showLast(reply, key);
        refreshAgreement();
      }, function (err) {
        delete state.done[item.index]; // not stored: it comes back with the next reply
        refill();
        throw err;
      });
    });
  }

  function undo() {
    var last = state.history.pop();
    el("undo").disabled = state.history.length === 0;
    if (!last) return;
    later(function () {
      var params = new URLSearchParams({ annotator: state.annotator });
      return call("DELETE", base + "/labels/" + last.id + "?" + params.toString()).then(function () {
        delete state.done[last.item.index];
        if (state.current) state.ahead.unshift(state.current);
        state.current = last.item;
        render(state.current);
        setStatus("label of #" + last.item.index + " removed: answer it again");
        refreshAgreement();
      });
    });
  }

  function start(name) {
    name = (name || "").trim();
    if (!name) {
      setStatus("Give your name first: every label records who gave it.", "error");
      queueBox.hidden = false;
      return;
    }
    state.annotator = name;
    localStorage.setItem("assay-annotator", name);
    el("annotator-shown").textContent = "labelling as " + name;
    queueBox.hidden = false;
    nameInput.blur();
    refill();
    refreshAgreement();
  }

  el("annotator-save").addEventListener("click", function () { start(nameInput.value); });
  nameInput.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") {
      ev.preventDefault();
      start(nameInput.value);
    }
  });
  el("undo").addEventListener("click", undo);
  Array.prototype.forEach.call(document.querySelectorAll("button.verdict"), function (b) {
    b.addEventListener("click", function () { answer(b.getAttribute("data-key")); });
  });

  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    var typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
    if (typing) {
      if (t === noteInput && (ev.key === "Enter" || ev.key === "Escape")) {
        ev.preventDefault();
        noteInput.blur();
      }
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !state.annotator) return;
    var k = ev.key.toLowerCase();
    if (verdictKeys.indexOf(k) >= 0 || k === "s") {
      ev.preventDefault();
      answer(k);
    } else if (k === "u") {
      ev.preventDefault();
      undo();
    } else if (k === "n") {
      ev.preventDefault();
      noteInput.focus();
    }
  });

  var saved = localStorage.getItem("assay-annotator");
  if (saved) {
    nameInput.value = saved;
    start(saved);
  } else {
    nameInput.focus();
  }
})();
