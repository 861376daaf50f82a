// The labelling page: every action is one POST whose answer (the state after it, sent
// once the label is on disk) is what the page shows next; nothing is kept in the page.
"use strict";
(function () {
  const body = document.body;
  const api = "/" + body.dataset.token + "/api/" + encodeURIComponent(body.dataset.assessor) + "/";
  // words too common to mark in a passage (the query's own stop words)
  const STOP = new Set(("a an and are as at be by can do does for from how in is it of on or the to was what " +
    "when where which who why with you your i my me we our this that these those not no").split(" "));
  const $ = (id) => document.getElementById(id);
  let state = null;
  let busy = false;
  // on until the assessor turns it off; kept across reloads of this tab
  let highlight = sessionStorage.getItem("exam-eval-highlight") !== "off";

  function scaleButtons(top, guidelines) {
    const box = $("scale");
    if (box.childElementCount === top + 1) return;
    box.textContent = "";
    for (let g = 0; g <= top; g++) {
      const [name, meaning] = guidelines[g] || ["", ""];
      const b = document.createElement("button");
      b.type = "button";
      b.id = "label-" + g;
      b.title = meaning;
      const k = document.createElement("kbd");
      k.textContent = String(g);
      const small = document.createElement("small");
      small.textContent = meaning;
      b.append(k, name, small);
      b.addEventListener("click", () => label(g));
      box.append(b);
    }
  }

  function queryTerms(query) {
    const terms = new Set();
    for (const w of query.toLowerCase().match(/[\p{L}\p{N}]+/gu) || []) {
      if (w.length > 1 && !STOP.has(w)) terms.add(w);
    }
    return terms;
  }

  // the passage as text nodes, its words that are query terms in <mark> (built node by
  // node: a passage is never parsed as HTML)
  function showPassage(el, text, query) {
    el.textContent = "";
    if (!highlight) { el.textContent = text; return; }
    const terms = queryTerms(query);
    let last = 0;
    for (const m of text.matchAll(/[\p{L}\p{N}]+/gu)) {
      if (!terms.has(m[0].toLowerCase())) continue;
      el.append(text.slice(last, m.index));
      el.appendChild(document.createElement("mark")).textContent = m[0];
      last = m.index + m[0].length;
    }
    el.append(text.slice(last));
  }

  function givenText(given) {
    if (given === null || given === undefined) return "";
    if (given === "cannot judge") return "You marked this pair: cannot judge. A label key replaces it.";
    const name = (state.guidelines[given] || [""])[0];
    return "Your label: " + given + (name ? " (" + name + ")" : "") + ". A label key changes it.";
  }

  function showHistory(s) {
    const list = $("history");
    list.textContent = "";
    $("history-box").hidden = !s.history.length;
    for (const h of s.history) {
      const li = list.appendChild(document.createElement("li"));
      li.dataset.at = String(h.at);
      if (s.pair && h.at === s.pair.at) li.className = "current";
      li.textContent = h.docno + ": " + (h.given === "cannot judge" ? "cannot judge" : h.given);
      li.addEventListener("click", () => call("goto", { at: h.at }));
    }
  }

  // the pair labelled before the one shown, in this query (the newest one where none is)
  function backToEarlier() {
    if (!state || !state.pair || !state.history.length) return;
    const earlier = state.history.filter((h) => h.at < state.pair.at);
    const to = earlier.length ? earlier[earlier.length - 1] : state.history[state.history.length - 1];
    if (to.at !== state.pair.at) call("goto", { at: to.at });
  }

  function render(s) {
    state = s;
    $("overall").max = Math.max(s.total, 1);
    $("overall").value = s.done;
    $("overall-text").textContent = s.done + " done / " + (s.total - s.done) + " left";
    const rows = $("per-query").tBodies[0];
    rows.textContent = "";
    const current = s.pair ? s.pair.qid : null;
    for (const q of s.per_query) {
      const tr = rows.insertRow();
      if (q.qid === current) tr.className = "current";
      for (const v of [q.qid, q.done, q.total - q.done]) tr.insertCell().textContent = String(v);
      if (q.qid === current) {
        $("query-bar").max = Math.max(q.total, 1);
        $("query-bar").value = q.done;
        $("query-text").textContent = q.done + " done / " + (q.total - q.done) + " left";
      }
    }
    $("notice").textContent = s.stale ? "Another page of yours moved on: this is the pair you are at now." : "";
    $("undo").disabled = $("undo-finished").disabled = !s.can_undo;
    if (!s.pair) {
      $("pair").hidden = true;
      $("finished").hidden = false;
      $("query-text").textContent = "";
      return;
    }
    $("finished").hidden = true;
    $("pair").hidden = false;
    $("pair").dataset.at = String(s.pair.at);
    $("qid").textContent = s.pair.qid;
    $("query").textContent = s.pair.query;
    for (const [id, title] of [["description", "Description: "], ["narrative", "Narrative: "]]) {
      $(id).hidden = !s.pair[id];
      $(id).textContent = "";
      if (s.pair[id]) $(id).append(Object.assign(document.createElement("b"), { textContent: title }), s.pair[id]);
    }
    $("given").hidden = s.pair.given === null || s.pair.given === undefined;
    $("given").textContent = givenText(s.pair.given);
    $("highlight").setAttribute("aria-pressed", String(highlight));
    const nugget = s.mode === "nugget";
    $("passage-view").hidden = nugget;
    $("nugget-view").hidden = !nugget;
    if (nugget) {
      $("run").textContent = s.pair.run_id;
      $("report").textContent = "";
      for (const sentence of s.pair.report) $("report").appendChild(document.createElement("li")).textContent = sentence;
      $("importance").textContent = "(" + s.pair.importance + ")";
      $("nugget").textContent = s.pair.nugget;
    } else {
      $("docno").textContent = s.pair.docno;
      showPassage($("passage"), s.pair.passage, s.pair.query);
    }
    showHistory(s);
    const llm = $("llm");
    llm.hidden = !("llm" in s.pair);
    llm.textContent = "LLM label: " + (s.pair.llm === null || s.pair.llm === undefined ? "none" : s.pair.llm);
    scaleButtons(s.scale, s.guidelines);
    $("note").value = "";
  }

  async function call(action, data) {
    if (busy) return;
    busy = true;
    try {
      let r;
      try {
        r = await fetch(api + action, {
          method: action === "state" ? "GET" : "POST",
          headers: action === "state" ? {} : { "Content-Type": "application/json" },
          body: action === "state" ? undefined : JSON.stringify(data || {}),
          cache: "no-store",
        });
      } catch (e) {
        return away();   // no answer at all: the server stopped, or listens on another port now
      }
      if (r.status === 404) return away();   // a server that does not know this token (--new-token)
      if (!r.ok) throw new Error((await r.text()) || r.statusText);
      const s = await r.json();
      if (gone) back();
      render(s);
    } catch (e) {
      $("notice").textContent = "Not saved: " + e.message + " (is exam-verify label still running?)";
    } finally {
      busy = false;
    }
  }

  // While the server is away the page asks its own URL again every few seconds: a restart
  // on the same folder serves the same URL (token and port kept there), and the page goes on.
  const RETRY_MS = 3000;
  let gone = false;
  let retry = null;

  function away() {
    gone = true;
    $("notice").textContent = "The labelling server stopped or moved: nothing is kept until it is back. Every " +
      "label this page showed as done is on disk. To go on, run exam-verify label FOLDER again and open the URL " +
      "it prints; while FOLDER/.token is kept it is this same URL, and this page goes on by itself once the " +
      "server answers (it tries every few seconds).";
    if (retry === null) retry = setTimeout(() => { retry = null; call("state"); }, RETRY_MS);
  }

  function back() {
    gone = false;
    if (retry !== null) clearTimeout(retry);
    retry = null;
    $("notice").textContent = "";
  }

  function cannotJudge() {
    if (!state || !state.pair) return;
    call("cannot_judge", { at: state.pair.at, note: $("note").value });
  }

  function toggleHighlight() {
    highlight = !highlight;
    sessionStorage.setItem("exam-eval-highlight", highlight ? "on" : "off");
    $("highlight").setAttribute("aria-pressed", String(highlight));
    // the passage only: a note being typed stays
    if (state && state.pair && state.mode !== "nugget") showPassage($("passage"), state.pair.passage, state.pair.query);
  }

  function label(g) {
    if (!state || !state.pair || g > state.scale) return;
    call("label", { at: state.pair.at, label: g, note: $("note").value });
  }

  document.addEventListener("keydown", (e) => {
    const inNote = document.activeElement === $("note");
    if (inNote) {
      if (e.key === "Enter" || e.key === "Escape") { $("note").blur(); e.preventDefault(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (/^[0-9]$/.test(e.key)) { label(Number(e.key)); e.preventDefault(); }
    else if (e.key === "u" || e.key === "Backspace") { call("undo"); e.preventDefault(); }
    else if (e.key === "s" && state && state.pair) { call("skip", { at: state.pair.at }); e.preventDefault(); }
    else if (e.key === "x") { cannotJudge(); e.preventDefault(); }
    else if (e.key === "b") { backToEarlier(); e.preventDefault(); }
    else if (e.key === "h") { toggleHighlight(); e.preventDefault(); }
    else if (e.key === "n" && state && state.pair) { $("note").focus(); e.preventDefault(); }
  });
  $("undo").addEventListener("click", () => call("undo"));
  $("undo-finished").addEventListener("click", () => call("undo"));
  $("skip").addEventListener("click", () => state && state.pair && call("skip", { at: state.pair.at }));
  $("cannot").addEventListener("click", cannotJudge);
  $("back").addEventListener("click", backToEarlier);
  $("highlight").addEventListener("click", toggleHighlight);
  call("state");
})();
