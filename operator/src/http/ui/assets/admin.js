// Live refresh of the cinder-operator admin pages: every two seconds the page's <main> is
// fetched again from the same origin (?fragment=main, rendered and escaped by the server) and
// swapped in place; the header says when it last worked or why it did not.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var status = document.getElementById("refresh-status");
  if (!main || !window.fetch) { return; }
  var url = main.getAttribute("data-refresh") || window.location.pathname;
  function show(text, failed) {
    if (!status) { return; }
    status.textContent = text;
    status.className = failed ? "bad" : "muted";
  }
  function tick() {
    fetch(url + "?fragment=main", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        main.innerHTML = html;
        show("live · updated " + new Date().toLocaleTimeString(), false);
      })
      .catch(function (e) { show("refresh failed: " + e.message, true); });
  }
  window.setInterval(tick, 2000);
})();
