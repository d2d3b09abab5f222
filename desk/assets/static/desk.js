// The inbox's live updates: the server sends an "inbox" event when the
// reviewer's inbox changes, and the list is fetched again. No framework,
// no inline script (the Content-Security-Policy forbids it).
(function () {
  "use strict";
  var box = document.getElementById("inbox");
  if (!box || !window.EventSource) {
    return;
  }
  var es = new EventSource("/events");
  es.addEventListener("inbox", function () {
    fetch("/inbox/list", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        box.innerHTML = html;
        box.setAttribute("data-updated", String(Date.now()));
      })
      .catch(function () {});
  });
})();
