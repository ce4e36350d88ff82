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
            // What the reader unfolded stays unfolded (an event's JSON).
            var unfolded = Array.prototype.map.call(live.querySelectorAll("details[id][open]"), function (d) { return d.id; });
            live.innerHTML = next.innerHTML;
            unfolded.forEach(function (id) { var d = document.getElementById(id); if (d) { d.open = true; } });
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
          var marker = /^##\[phase (\S+) \S+\] (.*)$/.exec(e.data);
          if (marker) { log = startPhase(log, marker[1], marker[2]); return; }
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

  // startPhase ends the phase whose log is pre and opens a new one (a
  // marker line of the build log; see internal/buildphase), returning the
  // new phase's log, which takes over the id "log".
  function startPhase(pre, id, title) {
    var prev = pre.parentNode;
    if (prev && prev.tagName === "DETAILS") {
      prev.open = false;
      prev.className = "phase ph-succeeded";
      var st = prev.querySelector(".ph-status");
      if (st) { st.textContent = "succeeded"; }
    }
    var d = document.createElement("details");
    d.className = "phase ph-running";
    d.setAttribute("data-phase", id);
    d.open = true;
    var sum = document.createElement("summary");
    var t = document.createElement("span");
    t.className = "ph-title";
    t.textContent = title;
    var s = document.createElement("span");
    s.className = "ph-status";
    s.textContent = "running";
    sum.appendChild(t);
    sum.appendChild(document.createTextNode(" "));
    sum.appendChild(s);
    d.appendChild(sum);
    var next = document.createElement("pre");
    next.className = "phase-log";
    next.tabIndex = 0;
    next.setAttribute("aria-label", "Build log");
    ["data-follow", "data-ended"].forEach(function (a) {
      if (pre.hasAttribute(a)) { next.setAttribute(a, pre.getAttribute(a)); pre.removeAttribute(a); }
    });
    pre.removeAttribute("id");
    next.id = "log";
    d.appendChild(next);
    document.getElementById("phases").appendChild(d);
    return next;
  }

  if (!document.hidden) {
    streams.forEach(function (s) { s.open(); });
  }
})();
