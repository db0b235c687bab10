// paperworks console: live progress on a job page, from the server-sent events /jobs/<id>/events
// relays from WatchJob (one `job` event per JobEvent, then `end`). No framework, no CDN.
"use strict";
(function () {
  const status = document.getElementById("status");
  if (!status || !window.EventSource) return;
  const jobId = status.dataset.job;
  const terminal = ["SUCCEEDED", "FAILED", "CANCELLED"];
  const startedTerminal = terminal.includes(status.dataset.state);
  const bar = document.getElementById("progress");
  const percent = document.getElementById("percent");
  const stage = document.getElementById("stage");
  const state = document.getElementById("state");
  const timeline = document.getElementById("timeline");
  const live = document.getElementById("live");

  function setPercent(value) {
    const p = Math.max(0, Math.min(100, Math.round(value)));
    bar.value = p;
    bar.textContent = p + "%";
    percent.textContent = p + "%";
  }

  function describe(e) {
    const parts = [e.time, e.type.toLowerCase().replace(/_/g, " ")];
    if (e.type === "STATE_CHANGED") parts.push(e.state.toLowerCase());
    if (e.progress) {
      parts.push("step " + e.progress.step + "/" + e.progress.total_steps);
      if (e.progress.stage) parts.push(e.progress.stage);
    }
    if (e.artifact) parts.push(e.artifact.name);
    if (e.message) parts.push(e.message);
    return parts.filter(Boolean).join(" · ");
  }

  const source = new EventSource("/jobs/" + encodeURIComponent(jobId) + "/events");
  live.textContent = "following the job live";
  source.addEventListener("job", function (message) {
    const e = JSON.parse(message.data);
    const item = document.createElement("li");
    item.textContent = describe(e);
    item.dataset.type = e.type;
    timeline.appendChild(item);
    timeline.scrollTop = timeline.scrollHeight;
    if (e.progress) {
      setPercent(100 * e.progress.fraction);
      stage.textContent = [e.progress.stage, e.progress.message].filter(Boolean).join(" · ");
    }
    if (e.state && e.state !== "UNSPECIFIED" && e.type === "STATE_CHANGED") {
      state.textContent = e.state.toLowerCase();
      state.className = "badge state-" + e.state;
      if (e.state === "SUCCEEDED") setPercent(100);
    }
  });
  source.addEventListener("end", function () {
    source.close();
    live.textContent = "the job is over";
    status.dataset.live = "done";
    if (!startedTerminal) window.location.reload();  // show the result and artifacts
  });
  source.addEventListener("failure", function (message) {
    source.close();
    const e = JSON.parse(message.data);
    if (e.code === "UNAUTHENTICATED") {
      window.location.assign("/login?reason=expired&next=" + encodeURIComponent(window.location.pathname));
      return;
    }
    live.textContent = "live updates stopped: " + e.code + ": " + e.message;
  });
})();
