// The labelling page: every action is one POST whose answer (the state after it, sent
// once the label is on disk) is what the page shows next; nothing is kept in the page.
"use strict";
(function () {
  const body = document.body;
  const api = "/" + body.dataset.token + "/api/" + encodeURIComponent(body.dataset.assessor) + "/";
  const NUGGET_NAMES = ["not support", "partial support", "support"];
  const NAMES = {
    1: ["not relevant", "relevant"],
    2: ["not relevant", "partly relevant", "relevant"],
    3: ["irrelevant", "related", "highly relevant", "perfectly relevant"],
  };
  const $ = (id) => document.getElementById(id);
  let state = null;
  let busy = false;

  function scaleButtons(top, mode) {
    const box = $("scale");
    if (box.childElementCount === top + 1) return;
    const names = mode === "nugget" ? NUGGET_NAMES : NAMES[top] || [];
    box.textContent = "";
    for (let g = 0; g <= top; g++) {
      const b = document.createElement("button");
      b.type = "button";
      b.id = "label-" + g;
      const k = document.createElement("kbd");
      k.textContent = String(g);
      b.append(k, names[g] || "");
      b.addEventListener("click", () => label(g));
      box.append(b);
    }
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
      $("passage").textContent = s.pair.passage;
    }
    const llm = $("llm");
    llm.hidden = !("llm" in s.pair);
    llm.textContent = "LLM label: " + (s.pair.llm === null || s.pair.llm === undefined ? "none" : s.pair.llm);
    scaleButtons(s.scale, s.mode);
    $("note").value = "";
  }

  async function call(action, data) {
    if (busy) return;
    busy = true;
    try {
      const r = await fetch(api + action, {
        method: action === "state" ? "GET" : "POST",
        headers: action === "state" ? {} : { "Content-Type": "application/json" },
        body: action === "state" ? undefined : JSON.stringify(data || {}),
        cache: "no-store",
      });
      if (!r.ok) throw new Error((await r.text()) || r.statusText);
      render(await r.json());
    } catch (e) {
      $("notice").textContent = "Not saved: " + e.message + " (is exam-verify label still running?)";
    } finally {
      busy = false;
    }
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
    else if (e.key === "n" && state && state.pair) { $("note").focus(); e.preventDefault(); }
  });
  $("undo").addEventListener("click", () => call("undo"));
  $("undo-finished").addEventListener("click", () => call("undo"));
  $("skip").addEventListener("click", () => state && state.pair && call("skip", { at: state.pair.at }));
  call("state");
})();
