// Live pages: on any change the stream reports, fetch this page again and swap its live part in place
// (no reload, the scroll position and the open form stay). Bursts are coalesced.
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  var refreshes = 0;
  var timer = null;
  var inFlight = false;
  var again = false;

  function setStatus(state, text) {
    if (!status) return;
    status.setAttribute("data-state", state);
    status.textContent = text;
  }

  function refresh() {
    timer = null;
    if (inFlight) { again = true; return; }
    inFlight = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.redirected || !r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-live]");
        var current = document.querySelector("[data-live]");
        if (fresh && current) {
          current.replaceWith(document.adoptNode(fresh));
          refreshes += 1;
          document.body.setAttribute("data-refreshes", String(refreshes));
        }
      })
      .catch(function () { setStatus("stale", "not updating: reload the page"); })
      .then(function () {
        inFlight = false;
        if (again) { again = false; schedule(); }
      });
  }

  function schedule() {
    if (timer === null) { timer = setTimeout(refresh, 150); }
  }

  if (!window.EventSource) { setStatus("off", "no live updates in this browser"); return; }
  var stream = new EventSource("/v1/stream?include=changes");
  stream.onopen = function () {
    setStatus("live", "live");
    document.body.setAttribute("data-live-ready", "true");
  };
  stream.onerror = function () { setStatus("connecting", "reconnecting…"); };
  ["change", "notice", "ack", "message", "wake"].forEach(function (name) {
    stream.addEventListener(name, schedule);
  });
})();
