// The dashboard's only script. Pages work without it; it adds copy buttons and the dynamic-link builder, which
// the HTML ships `hidden` so that nothing inert shows when JavaScript is off.

import { buildPayload, buildToken, dynamicLinkUrl, localDateTimeToUnix } from "./dynamic-link.js";

const COPIED_MS = 1500;

setUpCopyButtons();
setUpBuilder();
setUpImportProgress();
setUpLivePanel();

function setUpCopyButtons() {
  const labels = new WeakMap();
  const timers = new WeakMap();

  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.hidden = false;
    button.addEventListener("click", async () => {
      const source = document.getElementById(button.dataset.copy);
      if (!source) {
        return;
      }
      if (!(await copyText(source))) {
        // The fallback left the text selected and focused, ready for the keyboard shortcut.
        announce("Copy failed: the text is selected, press Ctrl+C to copy it");
        return;
      }
      // The fallback had to focus the input; give keyboard users their place back.
      if (document.activeElement === source) {
        button.focus();
      }
      announce("Copied");
      // Keep the first label: a second click within 1.5 s must not make "Copied" the label to restore.
      if (!labels.has(button)) {
        labels.set(button, button.textContent);
      }
      button.textContent = "Copied";
      clearTimeout(timers.get(button));
      timers.set(button, setTimeout(() => {
        button.textContent = labels.get(button);
      }, COPIED_MS));
    });
  }
}

async function copyText(input) {
  if (navigator.clipboard?.writeText) {
    try {
      await navigator.clipboard.writeText(input.value);
      return true;
    } catch {
      // Denied (permissions, document not focused): the selection route below may still work.
    }
  }
  // navigator.clipboard only exists in secure contexts; on plain http the old command is all there is.
  input.focus();
  input.select();
  input.setSelectionRange(0, input.value.length); // iOS ignores select() alone
  try {
    return document.execCommand("copy");
  } catch {
    return false;
  }
}

function announce(message) {
  const status = document.getElementById("copy-status");
  if (!status) {
    return;
  }
  if (status.textContent !== message) {
    status.textContent = message;
    return;
  }
  // A live region speaks only when its text changes: clear it, then set it again so a repeat copy is announced.
  status.textContent = "";
  setTimeout(() => {
    status.textContent = message;
  }, 100);
}

function setUpBuilder() {
  const form = document.getElementById("dynamic-builder");
  if (!form) {
    return;
  }
  const field = (id) => document.getElementById(id);
  const result = field("dl-result");
  const error = field("dl-error");
  let latest = 0;

  form.hidden = false;
  const noJs = field("dl-nojs");
  if (noJs) {
    noJs.hidden = true;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    // Encryption is async: if the form is submitted twice quickly, only the last submission may write.
    const run = ++latest;
    let url = "";
    let message = "";
    try {
      url = await buildUrl(form, field);
    } catch (err) {
      message = err instanceof Error ? err.message : String(err);
    }
    if (run !== latest) {
      return;
    }
    result.value = url;
    error.textContent = message;
  });
}

async function buildUrl(form, field) {
  const expires = field("dl-expires");
  // An incomplete date reads as "" — which would silently mean "never expires".
  if (expires.validity?.badInput) {
    throw new Error("Expires at is incomplete: fill in the date and time, or clear it for no expiry");
  }
  const expiresAt = localDateTimeToUnix(expires.value);
  if (expiresAt !== undefined && expiresAt <= Date.now() / 1000) {
    throw new Error("Expires at must be in the future");
  }
  const domain = field("dl-domain").value;
  if (!domain) {
    throw new Error("Choose a domain");
  }
  const payload = buildPayload({
    destination: field("dl-destination").value,
    backParam: field("dl-back").value,
    expiresAt,
  });
  const token = await buildToken(form.dataset.groupKey, payload);
  return dynamicLinkUrl(domain, form.dataset.groupId, token);
}

// An import's page: moves the progress bar and the counts while the job runs, from the job's status, then reloads
// once it has ended so that the page shows the problems (the page is right on reload at any time without this).
function setUpImportProgress() {
  const bar = document.querySelector("progress[data-poll]");
  if (!bar || bar.dataset.ended === "true") {
    return;
  }
  const state = document.getElementById("import-state");
  const counts = document.getElementById("import-counts");
  const tick = async () => {
    let job;
    try {
      const res = await fetch(bar.dataset.poll, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!res.ok) {
        throw new Error(String(res.status));
      }
      job = await res.json();
    } catch {
      setTimeout(tick, 3000);
      return;
    }
    bar.max = job.total;
    bar.value = job.processed;
    bar.textContent = `${job.processed} of ${job.total}`;
    state.textContent = job.state;
    for (const span of counts.querySelectorAll("[data-count]")) {
      span.textContent = String(job[span.dataset.count]);
    }
    if (job.status === "done" || job.status === "failed") {
      location.reload();
      return;
    }
    setTimeout(tick, 1000);
  };
  setTimeout(tick, 1000);
}

// A link's "Live" panel: every 5 seconds, the last hour's chart and total from the server, swapped in without a
// reload (the page renders both, so without this it is a snapshot). The chart is the server's SVG, drawn from
// numbers and times only.
function setUpLivePanel() {
  const chart = document.querySelector("#live-chart[data-poll]");
  const total = document.getElementById("live-total");
  if (!chart || !total) {
    return;
  }
  const tick = async () => {
    try {
      const res = await fetch(chart.dataset.poll, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (res.ok) {
        const live = await res.json();
        chart.innerHTML = live.chart;
        total.textContent = live.text;
      }
    } catch {
      // The next tick tries again.
    }
    setTimeout(tick, 5000);
  };
  setTimeout(tick, 5000);
}
