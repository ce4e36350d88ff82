// Free Agent dashboard: live updates without reloading. Every page works
// without this script; with it, the part of the page marked #live is
// refetched when the server says something changed, and a running build's
// log follows live. Streams close while the tab is hidden: a browser allows
// only a few connections per server, and background tabs must not use them up.
(function () {
  "use strict";

  var streams = []; // {open: function, close: function}
  document.addEventListener("visibilitychange", function () {
    streams.forEach(function (s) { if (document.hidden) { s.close(); } else { s.open(); } });
  });

  var live = document.getElementById("live");
  var stream = document.body.getAttribute("data-stream");
  if (live && stream && window.EventSource && window.fetch) {
    var busy = false, again = false;
    var refresh = function () {
      if (busy) { again = true; return; }
      busy = true;
      fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) {
          if (r.redirected || !r.ok) { throw new Error("refresh answered " + r.status); }
          return r.text();
        })
        .then(function (html) {
          var next = new DOMParser().parseFromString(html, "text/html").getElementById("live");
          // Unchanged content is left alone: no lost focus, no replaced form.
          if (next && next.innerHTML !== live.innerHTML) {
            var focused = document.activeElement && document.activeElement.id;
            live.innerHTML = next.innerHTML;
            if (focused && document.getElementById(focused)) { document.getElementById(focused).focus(); }
          }
        })
        .catch(function () { /* the next change or reconnect tries again */ })
        .then(function () {
          busy = false;
          document.body.setAttribute("data-synced", String(Date.now()));
          if (again) { again = false; setTimeout(refresh, 200); }
        });
    };
    var changes = null;
    streams.push({
      open: function () {
        if (changes) { return; }
        changes = new EventSource(stream);
        changes.addEventListener("change", refresh);
        // Changes made before the stream connected (or while it was closed
        // or reconnecting) were not signalled: catch up once connected.
        changes.addEventListener("open", refresh);
      },
      close: function () { if (changes) { changes.close(); changes = null; } }
    });
  }

  var log = document.getElementById("log");
  var follow = log && log.getAttribute("data-follow");
  if (follow && window.EventSource) {
    var base = follow.replace(/\?.*$/, "");
    var offset = (follow.match(/after=(\d+)/) || [0, "0"])[1];
    var logEvents = null, ended = false;
    streams.push({
      open: function () {
        if (logEvents || ended) { return; }
        logEvents = new EventSource(base + "?after=" + offset);
        logEvents.onmessage = function (e) {
          if (e.lastEventId) { offset = e.lastEventId; }
          var atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
          log.appendChild(document.createTextNode(e.data + "\n"));
          if (atBottom) { log.scrollTop = log.scrollHeight; }
        };
        logEvents.addEventListener("end", function (e) {
          ended = true;
          logEvents.close();
          logEvents = null;
          log.setAttribute("data-ended", e.data);
          var state = document.getElementById("log-state");
          if (state) { state.textContent = "(build " + e.data + ")"; }
        });
      },
      close: function () { if (logEvents) { logEvents.close(); logEvents = null; } }
    });
  }

  if (!document.hidden) {
    streams.forEach(function (s) { s.open(); });
  }
})();
