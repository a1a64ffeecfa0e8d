// hoh view's only script (served as a file: the page's CSP forbids inline script).
// Live updates: every POLL_MS the page asks its poll URL for the run's change stamp; the server answers
// 304 while nothing changed, so an idle page costs a few stat calls. When the stamp moves, each
// [data-part] region is fetched again and swapped in (server-rendered, escaped HTML), or the whole page
// reloads where it has no parts (data-reload). Running clocks ([data-since], epoch seconds) tick locally.
"use strict";
const POLL_MS = 1500;

function formatClock(seconds) {
  seconds = Math.max(0, Math.floor(seconds));
  const h = Math.floor(seconds / 3600), m = Math.floor(seconds / 60) % 60, s = seconds % 60;
  const two = (n) => String(n).padStart(2, "0");
  return h ? `${h}:${two(m)}:${two(s)}` : `${m}:${two(s)}`;
}

function tickClocks() {
  const now = Date.now() / 1000;
  for (const el of document.querySelectorAll("[data-since]")) {
    el.textContent = formatClock(now - parseFloat(el.dataset.since));
  }
}

async function refreshParts() {
  const parts = document.querySelectorAll("[data-part]");
  for (const el of parts) {
    const response = await fetch(el.dataset.part, {cache: "no-store", credentials: "same-origin"});
    if (response.ok) el.innerHTML = await response.text();
  }
  tickClocks();
}

async function poll() {
  const body = document.body;
  const state = document.getElementById("live-state");
  try {
    const response = await fetch(body.dataset.poll, {
      cache: "no-store", credentials: "same-origin", headers: {"If-None-Match": `"${body.dataset.etag}"`}});
    if (response.status === 200) {
      const {etag} = await response.json();
      if (etag !== body.dataset.etag) {
        body.dataset.etag = etag;
        if (body.dataset.reload) { window.location.reload(); return; }
        await refreshParts();
      }
    }
    if (state) state.textContent = "live · checked " + new Date().toLocaleTimeString();
  } catch (err) {
    if (state) state.textContent = "the view is not answering (was hoh view stopped?)";
  }
  window.setTimeout(poll, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  tickClocks();
  window.setInterval(tickClocks, 1000);
  if (document.body.dataset.poll) window.setTimeout(poll, POLL_MS);
});
