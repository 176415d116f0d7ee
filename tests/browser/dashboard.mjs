// The dashboard in a real browser, end to end: invitation, sign-in, "Create account" (open sign-up) and "Forgot
// password" with the reset link read from the mail the SMTP server received, API key, groups, the dynamic-link
// builder, links (create, pause, resume, clicks, QR code, edit, delete), domains and profile, checked against what
// the real edge worker then does with the published data; then teams: the owner invites a viewer and a member (the
// invitations are mailed too), each joins in their own browser context, the viewer cannot create (no form, a forged
// post is refused), the member creates and pauses a link, the owner sees both in Activity and removes the member,
// who loses the account. Every page is screenshotted at desktop and phone width and checked with axe-core. Elements are found by their accessible role, label or text only: those names are the
// dashboard's contract with its users (and with assistive technology), so a renamed label fails here.
//
// Run by tests/tests/dashboard_browser.rs, which starts the origin (with `--signup open` and mail through
// tests/support/smtp_sink.py), the SMTP sink and the worker; by hand:
//   DASHBOARD_URL=http://127.0.0.1:8080 INVITE_URL=… EDGE_URL=http://127.0.0.1:8787/ EDGE_HOST=go.example.com \
//   ACCOUNT_EMAIL=… MAIL_DIR=<the sink's directory> SCREENSHOT_DIR=target/dashboard-screenshots \
//   CHROMIUM=/usr/bin/chromium node tests/browser/dashboard.mjs
// Optional: EDGE_FALLBACK, the domain's fallback URL (where paused links and blocked bots go); VIEWER_EMAIL and
// MEMBER_EMAIL, the team the owner invites, and SIGNUP_EMAIL, who creates an account of their own (made up when
// not given); HEADED=1.

import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import http from "node:http";
import { mkdirSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

function env(name) {
  const value = process.env[name];
  assert.ok(value, `environment variable ${name} is required`);
  return value;
}

const DASHBOARD_URL = env("DASHBOARD_URL").replace(/\/$/, "");
const INVITE_URL = env("INVITE_URL");
const EDGE_URL = env("EDGE_URL");
const EDGE_HOST = env("EDGE_HOST");
const ACCOUNT_EMAIL = env("ACCOUNT_EMAIL");
const SCREENSHOT_DIR = env("SCREENSHOT_DIR");
// Where the SMTP sink writes each message it receives (NNNN.json: rcpt_tos, subject, body, …).
const MAIL_DIR = env("MAIL_DIR");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const EDGE_FALLBACK = process.env.EDGE_FALLBACK;

const BROWSER_UA =
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
const BOT_UA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

// The origin publishes to the worker in the background, and the worker caches records for a couple of seconds.
const PROPAGATION_MS = 45_000;
// Clicks travel worker → origin after the redirect (batched): allow for a loaded machine.
const CLICKS_MS = 60_000;

const AXE_SOURCE = readFileSync(join(repo, "node_modules/axe-core/axe.min.js"), "utf8");
const unique = Math.random().toString(36).slice(2, 8);

// ---------------------------------------------------------------------------------------------------------------
// Helpers

function step(message) {
  console.log(`\n== ${message}`);
}

/**
 * Calls `fn` until `until` holds for what it returns (default: truthy), and returns that; fails after `ms` with
 * `what` and the last value (or error), so a failure says what the edge or the page answered instead.
 */
async function poll(fn, what, { ms = PROPAGATION_MS, until = Boolean } = {}) {
  const start = Date.now();
  let last;
  for (;;) {
    try {
      last = await fn();
      if (until(last)) {
        console.log(`   ${what}: after ${Date.now() - start} ms`);
        return last;
      }
    } catch (err) {
      last = err;
    }
    if (Date.now() - start > ms) {
      assert.fail(`${what}: not within ${ms} ms (last: ${last instanceof Error ? last.stack : JSON.stringify(last)})`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * A request to the worker for `path` on EDGE_HOST, as a visitor's browser makes it. node:http, because fetch may
 * not set Host; redirects are not followed. Returns status and Location.
 */
function visitEdge(path, headers = {}, method = "GET") {
  const url = new URL(path, EDGE_URL);
  return new Promise((resolveVisit, reject) => {
    const req = http.request(
      url,
      { method, headers: { Host: EDGE_HOST, "User-Agent": BROWSER_UA, ...headers } },
      (res) => {
        res.resume();
        res.on("end", () => resolveVisit({ status: res.statusCode, location: res.headers.location }));
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error(`timeout on ${method} ${path}`)));
    req.on("error", reject);
    req.end();
  });
}

/**
 * Waits until the edge redirects `path` to `location` (HEAD by default: a HEAD is never counted as a click, so
 * waiting does not change the link's statistics).
 */
function edgeRedirects(path, location, what, { headers = {}, method = "HEAD" } = {}) {
  return poll(() => visitEdge(path, headers, method), what, {
    until: (v) => [302, 307].includes(v.status) && v.location === location,
  });
}

/** Waits until the edge sends `path` to the domain's fallback (any place but `notTo` without EDGE_FALLBACK). */
function edgeFallsBack(path, notTo, what) {
  return poll(() => visitEdge(path, {}, "HEAD"), what, {
    until: (v) => [302, 307].includes(v.status) && v.location !== notTo && (!EDGE_FALLBACK || v.location === EDGE_FALLBACK),
  });
}

/** The API as a program calls it: `GET /api/v1/external/groups` with `key`; returns the status. */
async function apiStatus(key) {
  const res = await fetch(`${DASHBOARD_URL}/api/v1/external/groups`, { headers: { Authorization: `Token ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

/** Full-page screenshots at desktop and phone width (`<name>-1280.png`, `<name>-390.png`), each checked by axe. */
async function shoot(page, name) {
  for (const size of [DESKTOP, PHONE]) {
    await page.setViewportSize(size);
    await chartsEndInView(page, `${name} at ${size.width}px`);
    await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}-${size.width}.png`), fullPage: true });
    await axeCheck(page, `${name} at ${size.width}px`);
  }
  await page.setViewportSize(DESKTOP);
}

/**
 * Each chart's last bar (today, or this minute) is in view in its frame: on a phone a chart is wider than the
 * screen and scrolls sideways, and it must open at its end rather than at the oldest day, with the scale's values
 * (repeated on the right) in view beside it.
 */
async function chartsEndInView(page, where) {
  const frames = await page.$$eval(".chart-wrap", (wraps) =>
    wraps.map((w) => {
      const bars = w.querySelectorAll("svg rect");
      if (bars.length === 0) return null;
      const frame = w.getBoundingClientRect();
      const last = bars[bars.length - 1].getBoundingClientRect();
      const values = [...w.querySelectorAll("svg text[aria-hidden='true']")].map((t) => t.getBoundingClientRect());
      return {
        label: w.getAttribute("aria-label"),
        left: frame.left,
        right: frame.right,
        bar: last.right,
        values: values.map((v) => [v.left, v.right]),
        scrolls: w.scrollWidth > w.clientWidth,
      };
    }),
  );
  for (const f of frames.filter(Boolean)) {
    assert.ok(
      f.bar <= f.right + 1 && f.bar > f.left,
      `${where}: the last bar of "${f.label}" is out of view (bar ends at ${f.bar}, frame ${f.left}–${f.right}, scrolls: ${f.scrolls})`,
    );
    assert.ok(f.values.length >= 2, `${where}: "${f.label}" has no scale values on the right`);
    for (const [left, right] of f.values) {
      assert.ok(
        left >= f.left - 1 && right <= f.right + 1,
        `${where}: a scale value of "${f.label}" is out of view (${left}–${right}, frame ${f.left}–${f.right})`,
      );
    }
  }
}

// Serious and critical violations: their description (rule and elements) → the pages and widths they were on.
const axeProblems = new Map();

/**
 * Runs axe-core in the page and records violations of impact "serious" or "critical" (reported together at the
 * end, so one run shows them all). The page's CSP (`default-src 'self'`) refuses an injected <script>; code
 * evaluated through the DevTools protocol is not subject to it, so axe's source is evaluated instead.
 */
async function axeCheck(page, name) {
  if (!(await page.evaluate(() => typeof window.axe !== "undefined"))) {
    await page.evaluate(AXE_SOURCE);
  }
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  for (const v of results.violations) {
    const nodes = v.nodes.map((n) => `    ${n.target.join(" ")}: ${n.failureSummary?.replace(/\s+/g, " ")}`);
    const problem = `[${v.impact}] ${v.id}: ${v.help} (${v.helpUrl})\n${nodes.join("\n")}`;
    if (v.impact === "serious" || v.impact === "critical") {
      axeProblems.set(problem, [...(axeProblems.get(problem) ?? []), name]);
      console.log(`   axe: ${name}: [${v.impact}] ${v.id} (${v.nodes.length} element(s))`);
    } else {
      console.log(`   axe (minor, not failing): ${name}: ${problem}`);
    }
  }
}

/** Fails if markup from user text ran or became elements: the test's payloads set `window.__xss` or load `x`. */
async function assertNoXss(page) {
  assert.equal(await page.evaluate(() => window.__xss), undefined, `an injected script ran on ${page.url()}`);
  const injected = await page.evaluate(() => document.querySelectorAll('img[src="x"], script:not([src])').length);
  assert.equal(injected, 0, `injected elements on ${page.url()}`);
}

/** The main navigation's link `name`. */
function nav(page, name) {
  return page.getByRole("navigation", { name: "Main" }).getByRole("link", { name, exact: true });
}

/** Waits for the page's level-1 heading to contain `name` (the page after a click may still be loading). */
async function expectHeading(page, name) {
  try {
    await page.getByRole("heading", { level: 1, name }).waitFor({ timeout: 10_000 });
  } catch {
    const text = await page.getByRole("heading", { level: 1 }).allTextContents();
    const main = (await page.locator("main").first().innerText().catch(() => "")).slice(0, 600);
    assert.fail(`expected the page heading "${name}", got ${JSON.stringify(text)} at ${page.url()}; the page says:\n${main}`);
  }
}

async function expectText(page, text) {
  const count = await page.getByText(text, { exact: false }).count();
  assert.ok(count > 0, `expected "${text}" on ${page.url()}`);
}

async function expectSignedIn(page) {
  for (const name of ["Links", "Groups", "API key", "Domains", "Profile"]) {
    assert.equal(await nav(page, name).count(), 1, `nav link "${name}" on ${page.url()}`);
  }
  assert.equal(await page.getByRole("button", { name: "Sign out" }).count(), 1, "the Sign out button");
}

/** The header names the role the signed-in person has in the current account (its text, e.g. "owner"). */
async function expectRole(page, role) {
  const shown = page.getByRole("banner").getByText(role, { exact: true });
  assert.equal(await shown.count(), 1, `the header says the role "${role}" on ${page.url()}`);
  assert.ok(await shown.isVisible(), `the role "${role}" is visible in the header on ${page.url()}`);
}

/** The main navigation a `role` gets: every role sees Links to Profile; admins and owners also API key, Members, Activity. */
async function expectNavFor(page, role) {
  const manages = role === "admin" || role === "owner";
  for (const name of ["Links", "Groups", "Domains", "Profile"]) {
    assert.equal(await nav(page, name).count(), 1, `nav link "${name}" for a ${role} on ${page.url()}`);
  }
  for (const name of ["API key", "Members", "Activity", "Webhooks"]) {
    assert.equal(await nav(page, name).count(), manages ? 1 : 0, `nav link "${name}" ${manages ? "shown" : "hidden"} for a ${role}`);
  }
  await expectRole(page, role);
}

/**
 * Invites `email` as `role` from the Members page and returns the one-use link the page shows in its read-only
 * "Invitation link" field.
 */
async function inviteMember(page, email, role) {
  await page.getByLabel("Email", { exact: true }).fill(email);
  await page.getByLabel("Role", { exact: true }).selectOption(role);
  await page.getByRole("button", { name: "Invite member" }).click();
  // The answer is the Members page with the invitation on top (the same URL for a second invitation).
  await page.getByRole("heading", { level: 2, name: `Invitation for ${email}` }).waitFor();
  const field = page.getByLabel("Invitation link", { exact: true });
  assert.equal(await field.getAttribute("readonly"), "", "the invitation link field is read-only");
  const link = await field.inputValue();
  assert.ok(link.startsWith(`${DASHBOARD_URL}/dashboard/invite/`), `the invitation link ${link}`);
  assert.ok(await page.getByRole("button", { name: "Copy invitation link" }).isVisible(), "the copy button is shown");
  await expectText(page, "It was also sent to them by email.");
  return link;
}

async function signIn(page, email, password) {
  await page.getByLabel("Email", { exact: true }).fill(email);
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForLoadState();
}

async function signOut(page) {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL("**/dashboard/sign-in");
}

/** The value of the read-only field labelled `label`. */
async function fieldValue(page, label) {
  return page.getByLabel(label, { exact: true }).inputValue();
}

/** The links-page row whose destination link reads `longUrl`. */
function linkRow(page, longUrl) {
  return page.getByRole("row").filter({ has: page.getByRole("link", { name: longUrl, exact: true }) });
}

/** A table's rows as arrays of cell texts, the table found by its caption. */
async function tableRows(page, caption) {
  const table = page.getByRole("table", { name: caption, exact: true });
  assert.equal(await table.count(), 1, `a table captioned "${caption}" on ${page.url()}`);
  const rows = await table.getByRole("row").all();
  const out = [];
  for (const row of rows) {
    const cells = await row.getByRole("cell").allTextContents();
    if (cells.length) out.push(cells.map((c) => c.trim()));
  }
  return out;
}

/** Every message the SMTP sink has received so far, oldest first (it writes each file whole, by a rename). */
function mails() {
  return readdirSync(MAIL_DIR)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => JSON.parse(readFileSync(join(MAIL_DIR, name), "utf8")));
}

/** Waits for the one message to `address` whose subject is `subject`, and returns it. */
async function mailTo(address, subject) {
  const found = await poll(
    () => mails().filter((m) => m.rcpt_tos.includes(address) && m.subject === subject),
    `the mail "${subject}" to ${address}`,
    { ms: 20_000, until: (list) => list.length > 0 },
  );
  assert.equal(found.length, 1, `one mail "${subject}" to ${address}: ${JSON.stringify(found, null, 1)}`);
  const [mail] = found;
  assert.deepEqual(mail.rcpt_tos, [address], "the mail goes to that person alone");
  assert.equal(mail.to, address, "its To: header");
  assert.equal(mail.content_type, "text/plain", "plain text");
  return mail;
}

/** The link on a line of its own in `mail`'s body that starts with `prefix` (there must be exactly one). */
function linkIn(mail, prefix) {
  const lines = mail.body.split(/\r?\n/).filter((l) => l.startsWith(prefix));
  assert.equal(lines.length, 1, `one line starting ${prefix} in:\n${mail.body}`);
  return lines[0].trim();
}

// ---------------------------------------------------------------------------------------------------------------
// A webhook receiver on loopback: records every request (headers and body) and answers 200 at once.

const received = [];
const receiver = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    received.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
    res.writeHead(200, { "Content-Type": "text/plain" });
    res.end("ok");
  });
});
await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
const RECEIVER_URL = `http://127.0.0.1:${receiver.address().port}/hooks/shortlink`;

/**
 * Checks a received request's Standard Webhooks signature against `secret` (`whsec_` + base64 key): `v1,` and the
 * base64 HMAC-SHA256 of `id.timestamp.body`, computed here independently of the origin's code; returns its JSON.
 */
function verifiedWebhook(request, secret) {
  const id = request.headers["webhook-id"];
  const timestamp = request.headers["webhook-timestamp"];
  assert.ok(id && timestamp, `Standard Webhooks headers: ${JSON.stringify(request.headers)}`);
  assert.ok(Math.abs(Date.now() / 1000 - Number(timestamp)) < 300, `a current timestamp: ${timestamp}`);
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  const expected = `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${request.body}`).digest("base64")}`;
  const signatures = request.headers["webhook-signature"].split(" ");
  assert.ok(signatures.includes(expected), `a valid signature: ${request.headers["webhook-signature"]}`);
  return { id, event: JSON.parse(request.body) };
}

// ---------------------------------------------------------------------------------------------------------------
// Problems the browser reports (script errors, CSP refusals, failed assets) fail the run at the end.

const browserProblems = [];

function watch(page) {
  page.on("pageerror", (err) => browserProblems.push(`page error on ${page.url()}: ${err.message}`));
  page.on("console", (msg) => {
    // "Failed to load resource" repeats a response's status, which the listener below judges (404 pages are fine).
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource"))
      browserProblems.push(`console error on ${page.url()}: ${msg.text()}`);
  });
  page.on("response", (res) => {
    const url = res.url();
    // Refused forms answer 422 by design; everything a page loads by itself must succeed.
    if (res.status() >= 400 && res.request().resourceType() !== "document") {
      browserProblems.push(`${res.status()} for ${url} (on ${page.url()})`);
    }
  });
}

// ---------------------------------------------------------------------------------------------------------------

mkdirSync(SCREENSHOT_DIR, { recursive: true });
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: !process.env.HEADED,
  args: ["--no-sandbox"],
});
const started = Date.now();
try {
  const context = await browser.newContext({ viewport: DESKTOP, userAgent: BROWSER_UA });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  watch(page);

  const password = `first-${unique}-password`;
  const newPassword = `second-${unique}-password`;

  // -------------------------------------------------------------------------------------------------------------
  step("invitation: choose a password");
  await page.goto(INVITE_URL);
  await expectHeading(page, "Join ");
  await expectText(page, ACCOUNT_EMAIL);
  await shoot(page, "invite");
  // Mismatched passwords first: the server refuses them and the invitation stays usable.
  await page.getByLabel("New password", { exact: true }).fill(password);
  await page.getByLabel("Confirm password", { exact: true }).fill(`${password}-not-the-same`);
  await page.getByRole("button", { name: "Accept invitation" }).click();
  await page.getByRole("alert").waitFor();
  assert.ok(page.url().includes("/dashboard/invite/"), `mismatched passwords must stay on the invitation: ${page.url()}`);
  await shoot(page, "invite-error");
  await page.getByLabel("New password", { exact: true }).fill(password);
  await page.getByLabel("Confirm password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Accept invitation" }).click();
  await page.waitForURL(`${DASHBOARD_URL}/dashboard/?done=joined`);
  await expectHeading(page, "Links");
  await expectSignedIn(page);
  await expectRole(page, "owner");
  await shoot(page, "links-empty");

  // An invitation works once.
  const spent = await context.newPage();
  await spent.goto(INVITE_URL);
  await expectHeading(spent, "This invitation cannot be used");
  await shoot(spent, "invite-used");
  await spent.close();

  // -------------------------------------------------------------------------------------------------------------
  step("sign out, a wrong password, sign in");
  await signOut(page);
  await expectHeading(page, "Sign in");
  // Open sign-up and mail: the page links to both ways in without a password.
  for (const name of ["Forgot password", "Create account"]) {
    assert.equal(await page.getByRole("link", { name, exact: true }).count(), 1, `the sign-in page links to "${name}"`);
  }
  await shoot(page, "sign-in");
  await signIn(page, ACCOUNT_EMAIL, "not-the-password-at-all");
  await expectText(page, "Wrong email or password.");
  await shoot(page, "sign-in-error");
  await signIn(page, ACCOUNT_EMAIL, password);
  await page.waitForURL(`${DASHBOARD_URL}/dashboard/`);
  await expectSignedIn(page);

  // -------------------------------------------------------------------------------------------------------------
  step("sign-up: a visitor creates an account of their own");
  const signupEmail = process.env.SIGNUP_EMAIL || `signup-${unique}@example.com`;
  const signupPassword = `signup-${unique}-password`;
  const resetPassword = `reset-${unique}-password`;
  const visitor = await browser.newContext({ viewport: DESKTOP, userAgent: BROWSER_UA });
  const sp = await visitor.newPage();
  sp.setDefaultTimeout(15_000);
  watch(sp);
  await sp.goto(`${DASHBOARD_URL}/dashboard/sign-in`);
  await expectHeading(sp, "Sign in");
  await sp.getByRole("link", { name: "Create account", exact: true }).click();
  await sp.waitForURL("**/dashboard/sign-up");
  await expectHeading(sp, "Create account");
  assert.equal(await sp.getByRole("navigation", { name: "Main" }).count(), 0, "no navigation before signing up");
  await shoot(sp, "signup");
  // A typo in the confirmation: refused, nothing made, the email kept.
  await sp.getByLabel("Email", { exact: true }).fill(signupEmail);
  await sp.getByLabel("Password", { exact: true }).fill(signupPassword);
  await sp.getByLabel("Confirm password", { exact: true }).fill(`${signupPassword}-typo`);
  await sp.getByRole("button", { name: "Create account" }).click();
  await sp.getByRole("alert").waitFor();
  assert.ok(sp.url().endsWith("/dashboard/sign-up"), `mismatched passwords stay on sign-up: ${sp.url()}`);
  assert.equal(await sp.getByLabel("Email", { exact: true }).inputValue(), signupEmail, "the email is kept");
  await shoot(sp, "signup-error");
  await sp.getByLabel("Password", { exact: true }).fill(signupPassword);
  await sp.getByLabel("Confirm password", { exact: true }).fill(signupPassword);
  await sp.getByRole("button", { name: "Create account" }).click();
  await sp.waitForURL(`${DASHBOARD_URL}/dashboard/?done=welcome`);
  await expectHeading(sp, "Links");
  await expectText(sp, "Welcome: your account is ready");
  // Signed in as the owner of a new account: the header says who, the role, and the account (named by the email).
  await expectNavFor(sp, "owner");
  const header = sp.getByRole("banner");
  assert.equal(
    await header.getByText(signupEmail, { exact: true }).count(),
    2,
    `the header shows the account's name and who is signed in, both ${signupEmail}`,
  );
  assert.ok(await header.getByText(signupEmail, { exact: true }).last().isVisible(), "who is signed in is visible");
  assert.ok(!(await sp.getByRole("main").innerText()).includes(ACCOUNT_EMAIL), "nothing of the other account");
  await shoot(sp, "signup-welcome");
  await nav(sp, "Members").click();
  await expectHeading(sp, "Members");
  assert.deepEqual(
    (await tableRows(sp, `Members of ${signupEmail}`)).map((r) => [r[0], r[1]]),
    [[`${signupEmail} You`, "owner"]],
    "the new account has its maker alone, as owner",
  );
  // A second browser signed in as the new user: a reset ends this session too.
  const elsewhere = await browser.newContext({ viewport: DESKTOP, userAgent: BROWSER_UA });
  const ep = await elsewhere.newPage();
  ep.setDefaultTimeout(15_000);
  watch(ep);
  await ep.goto(`${DASHBOARD_URL}/dashboard/sign-in`);
  await signIn(ep, signupEmail, signupPassword);
  await ep.waitForURL(`${DASHBOARD_URL}/dashboard/`);
  await expectRole(ep, "owner");
  await signOut(sp);

  // -------------------------------------------------------------------------------------------------------------
  step("forgot password: the same answer for an unknown email, a reset link by mail for the user");
  const unknownEmail = `nobody-${unique}@example.com`;
  /** From the sign-in page: "Forgot password", `email`, "Send reset link"; returns the answer's main text. */
  async function askReset(email, screenshots) {
    await sp.getByRole("link", { name: "Forgot password", exact: true }).click();
    await sp.waitForURL("**/dashboard/forgot-password");
    await expectHeading(sp, "Forgot password");
    if (screenshots) await shoot(sp, "forgot");
    await sp.getByLabel("Email", { exact: true }).fill(email);
    await sp.getByRole("button", { name: "Send reset link" }).click();
    await sp.waitForURL("**/dashboard/forgot-password?sent=1");
    await expectHeading(sp, "Forgot password");
    await expectText(sp, "If this email has a user here, a link to set a new password is on its way to it.");
    assert.equal(await sp.getByRole("button", { name: "Send reset link" }).count(), 0, "no form once it is sent");
    if (screenshots) await shoot(sp, "forgot-sent");
    const said = await sp.getByRole("main").innerText();
    await sp.getByRole("link", { name: "Back to sign in", exact: true }).click();
    await sp.waitForURL("**/dashboard/sign-in");
    return said;
  }
  const toUnknown = await askReset(unknownEmail, true);
  const toUser = await askReset(signupEmail, false);
  assert.equal(toUser, toUnknown, "the same confirmation whether the email has a user or not");
  const resetMail = await mailTo(signupEmail, "Reset your Shortlink password");
  const resetLink = linkIn(resetMail, `${DASHBOARD_URL}/dashboard/reset/`);

  step("reset: the mailed link sets a new password, once");
  await sp.goto(resetLink);
  await expectHeading(sp, "Set a new password");
  assert.equal(await sp.getByRole("navigation", { name: "Main" }).count(), 0, "no navigation on the reset page");
  await shoot(sp, "reset");
  await sp.getByLabel("New password", { exact: true }).fill(resetPassword);
  await sp.getByLabel("Confirm password", { exact: true }).fill(`${resetPassword}-typo`);
  await sp.getByRole("button", { name: "Set password" }).click();
  await sp.getByRole("alert").waitFor();
  assert.equal(sp.url(), resetLink, "mismatched passwords stay on the link, which stays usable");
  await shoot(sp, "reset-error");
  await sp.getByLabel("New password", { exact: true }).fill(resetPassword);
  await sp.getByLabel("Confirm password", { exact: true }).fill(resetPassword);
  await sp.getByRole("button", { name: "Set password" }).click();
  await sp.waitForURL("**/dashboard/sign-in?done=reset");
  await expectHeading(sp, "Sign in");
  await expectText(sp, "Your new password is set");
  assert.equal(await sp.getByRole("button", { name: "Sign out" }).count(), 0, "nobody is signed in by a reset");
  await shoot(sp, "reset-done");
  // Every session of the user ended: the other browser is sent to sign in.
  await ep.reload();
  await ep.waitForURL("**/dashboard/sign-in");
  await expectHeading(ep, "Sign in");
  await elsewhere.close();
  // The old password is over, the new one works.
  await signIn(sp, signupEmail, signupPassword);
  await expectText(sp, "Wrong email or password.");
  await signIn(sp, signupEmail, resetPassword);
  await sp.waitForURL(`${DASHBOARD_URL}/dashboard/`);
  await expectNavFor(sp, "owner");
  // A second use of the link is refused, signed in or not.
  const again = await sp.goto(resetLink);
  assert.equal(again.status(), 404, "a spent reset link answers 404");
  await expectHeading(sp, "This link cannot be used");
  assert.equal(await sp.getByLabel("New password", { exact: true }).count(), 0, "no form on a spent link");
  await shoot(sp, "reset-used");
  await visitor.close();
  // Only the user's email got a link.
  assert.ok(
    !mails().some((m) => m.rcpt_tos.includes(unknownEmail)),
    `nothing was mailed to the unknown email: ${JSON.stringify(mails().map((m) => m.rcpt_tos))}`,
  );

  // -------------------------------------------------------------------------------------------------------------
  step("API key: generate, use, mask, regenerate, revoke");
  await nav(page, "API key").click();
  await expectHeading(page, "API key");
  await shoot(page, "key-none");
  await page.getByRole("button", { name: "Generate key" }).click();
  // A sensitive action: its confirmation asks for the password again.
  await expectHeading(page, "Generate an API key?");
  await page.getByLabel("Your password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Generate key" }).click();
  const firstKey = await fieldValue(page, "Your new API key");
  assert.match(firstKey, /^slk_[A-Za-z0-9]{20,}$/, "the new key is shown");
  assert.equal(
    await page.getByLabel("Your new API key", { exact: true }).getAttribute("readonly"),
    "",
    "the key field is read-only",
  );
  await shoot(page, "key-new");
  assert.equal(await apiStatus(firstKey), 200, "the new key works with the API");

  // Shown once: the page as reached again has only the masked form.
  await page.goto(`${DASHBOARD_URL}/dashboard/key`);
  const keyHtml = await page.content();
  assert.ok(!keyHtml.includes(firstKey), "the full key must not be in the key page once it was shown");
  assert.ok(!keyHtml.includes(firstKey.slice(4, 20)), "no part of the key's secret in the page");
  const masked = `slk_${"*".repeat(firstKey.length - 8)}${firstKey.slice(-4)}`;
  assert.ok(keyHtml.includes(masked), `the masked key ${masked} is shown`);
  assert.equal(await page.getByLabel("Your new API key").count(), 0, "no key field on a plain visit");
  await shoot(page, "key-masked");

  await page.getByRole("button", { name: "Regenerate key" }).click();
  await expectHeading(page, "Regenerate the API key?");
  await shoot(page, "confirm-regenerate");
  // A wrong password changes nothing and says so.
  await page.getByLabel("Your password", { exact: true }).fill("not-the-password-at-all");
  await page.getByRole("button", { name: "Regenerate key" }).click();
  await page.getByRole("alert").filter({ hasText: "The password is wrong. Nothing was changed." }).waitFor();
  assert.equal(await apiStatus(firstKey), 200, "a wrong password leaves the key working");
  await shoot(page, "confirm-wrong-password");
  await page.getByLabel("Your password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Regenerate key" }).click();
  const secondKey = await fieldValue(page, "Your new API key");
  assert.match(secondKey, /^slk_/, "the regenerated key is shown");
  assert.notEqual(secondKey, firstKey, "a different key");
  assert.equal(await apiStatus(firstKey), 401, "the old key stops working at once");
  assert.equal(await apiStatus(secondKey), 200, "the new key works");

  await page.goto(`${DASHBOARD_URL}/dashboard/key`);
  await page.getByRole("button", { name: "Revoke key" }).click();
  await expectHeading(page, "Revoke the API key?");
  await page.getByLabel("Your password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Revoke key" }).click();
  await page.waitForURL("**/dashboard/key?done=revoked");
  assert.equal(await apiStatus(secondKey), 401, "a revoked key gets 401");
  assert.equal(await page.getByRole("button", { name: "Generate key" }).count(), 1, "a key can be generated again");
  await shoot(page, "key-revoked");

  // -------------------------------------------------------------------------------------------------------------
  step("groups: create, settings");
  await nav(page, "Groups").click();
  await expectHeading(page, "Groups");
  await shoot(page, "groups");
  const groupName = `Campaign ${unique}`;
  await page.getByLabel("Group name", { exact: true }).fill(groupName);
  await page.getByRole("button", { name: "Create group" }).click();
  await page.waitForURL(/\/dashboard\/groups\/[0-9a-f-]{36}\?done=created$/);
  await expectHeading(page, groupName);
  const groupId = await fieldValue(page, "Group ID");
  const groupKey = await fieldValue(page, "Group key");
  assert.match(groupId, /^[0-9a-f-]{36}$/, "the group id is shown");
  assert.match(groupKey, /^[A-Za-z0-9_-]{43}$/, "the group key is shown (32 bytes, base64url)");
  assert.ok(page.url().includes(groupId), "the page of the new group");
  // app.js unhides the copy buttons (the page ships them hidden for browsers without JavaScript).
  for (const name of ["Copy group ID", "Copy group key"]) {
    assert.ok(await page.getByRole("button", { name, exact: true }).isVisible(), `the "${name}" button is shown`);
  }

  await shoot(page, "group");

  // -------------------------------------------------------------------------------------------------------------
  step("dynamic-link builder, and the link at the edge");
  await page.getByLabel("Destination URL", { exact: true }).fill("https://example.com/dyn");
  await page.getByLabel("Back parameters", { exact: true }).fill("ref=dash");
  assert.equal(await page.getByLabel("Expires at", { exact: true }).inputValue(), "", "no expiry");
  await page.getByLabel("Domain", { exact: true }).selectOption({ label: EDGE_HOST });
  await page.getByRole("button", { name: "Build link" }).click();
  const dynamic = await poll(() => fieldValue(page, "Dynamic link"), "the builder's link");
  const prefix = `https://${EDGE_HOST}/e/${groupId}?signature=`;
  assert.ok(dynamic.startsWith(prefix), `dynamic link ${dynamic} starts with ${prefix}`);
  await shoot(page, "group-built");
  const dynamicUrl = new URL(dynamic);
  const dynamicPath = dynamicUrl.pathname + dynamicUrl.search;
  const dynamicDestination = "https://example.com/dyn?ref=dash";
  // A browser gets the destination with the back parameters, once the group has reached the edge; so does a bot,
  // while the group lets bots through (the default).
  await edgeRedirects(dynamicPath, dynamicDestination, "the dynamic link sends a browser on", { method: "GET" });
  await edgeRedirects(dynamicPath, dynamicDestination, "the dynamic link sends a bot on (bots allowed)", {
    method: "GET",
    headers: { "User-Agent": BOT_UA },
  });

  step("group settings: block bots, analytics on");
  // Analytics on: the clicks on the link made below in this group are counted.
  await page.getByLabel("Block bots", { exact: true }).check();
  await page.getByLabel("Analytics", { exact: true }).check();
  await page.getByRole("button", { name: "Save settings" }).click();
  await page.waitForURL(/\?done=saved$/);
  assert.ok(await page.getByLabel("Block bots", { exact: true }).isChecked(), "Block bots is still checked");
  assert.ok(await page.getByLabel("Analytics", { exact: true }).isChecked(), "Analytics is still checked");
  await shoot(page, "group-saved");
  // The settings reach the edge: bots now go to the domain's fallback, browsers still get through.
  await poll(() => visitEdge(dynamicPath, { "User-Agent": BOT_UA }), "a bot is sent to the fallback (bots blocked)", {
    until: (v) => v.location !== dynamicDestination && (!EDGE_FALLBACK || v.location === EDGE_FALLBACK),
  });
  await edgeRedirects(dynamicPath, dynamicDestination, "a browser still gets through", { method: "GET" });

  // -------------------------------------------------------------------------------------------------------------
  step("links: create, pause, resume at the edge");
  await nav(page, "Links").click();
  const code = `dash-${unique}`;
  const landing = "https://example.com/landing";
  const shortUrl = `https://${EDGE_HOST}/${code}`;
  await page.getByLabel("Destination URL", { exact: true }).fill(landing);
  await page.getByLabel("Short code", { exact: true }).fill(code);
  await page.getByLabel("Group", { exact: true }).selectOption({ label: groupName });
  await page.getByLabel("Domain", { exact: true }).selectOption({ label: EDGE_HOST });
  await page.getByRole("button", { name: "Create link" }).click();
  await page.waitForURL("**/dashboard/?done=created");
  let row = linkRow(page, landing);
  assert.equal(await row.count(), 1, "the new link's row");
  assert.equal(await row.getByRole("textbox", { name: "Short URL" }).inputValue(), shortUrl, "its short URL");
  await shoot(page, "links");
  await edgeRedirects(`/${code}`, landing, "the new link redirects at the edge");

  await row.getByRole("button", { name: "Pause" }).click();
  await page.waitForURL("**/dashboard/?done=paused");
  row = linkRow(page, landing);
  assert.ok((await row.textContent()).includes("Paused"), "the row says Paused");
  await shoot(page, "links-paused");
  await edgeFallsBack(`/${code}`, landing, "a paused link sends visitors to the fallback");
  await row.getByRole("button", { name: "Resume" }).click();
  await page.waitForURL("**/dashboard/?done=resumed");
  await edgeRedirects(`/${code}`, landing, "a resumed link redirects again");

  // -------------------------------------------------------------------------------------------------------------
  step("clicks: three visits from Munich, from a news site, by two visitors; one from an iPhone with a campaign");
  const VISITS = 4;
  const referrer = "https://news.example.org/x";
  const place = { "CF-IPCountry": "DE", "CF-Region": "Bavaria", "CF-IPCity": "Munich", Referer: referrer };
  const IPHONE = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    + "Version/18.1 Mobile/15E148 Safari/604.1";
  for (const [path, headers] of [
    [`/${code}`, { ...place, "CF-Connecting-IP": "198.51.100.1" }],
    [`/${code}`, { ...place, "CF-Connecting-IP": "198.51.100.2" }],
    [`/${code}`, { ...place, "CF-Connecting-IP": "198.51.100.2" }],
    [`/${code}?utm_source=newsletter&utm_campaign=spring`, { ...place, "CF-Connecting-IP": "198.51.100.2", "User-Agent": IPHONE }],
  ]) {
    const v = await visitEdge(path, headers);
    assert.ok([302, 307].includes(v.status) && v.location.startsWith(landing), `visit ${path}: ${JSON.stringify(v)}`);
  }

  step("the link's page: QR code, chart, tables");
  await linkRow(page, landing).getByRole("link", { name: landing, exact: true }).click();
  await page.waitForURL(/\/dashboard\/links\/[0-9a-f-]{36}$/);
  const linkPageUrl = page.url();
  const qr = page.getByRole("img", { name: `QR code for ${shortUrl}`, exact: true });
  assert.equal(await qr.count(), 1, "the QR code image");
  await poll(() => qr.evaluate((img) => img.complete && img.naturalWidth > 0), "the QR code loads", { ms: 5_000 });
  for (const [name, type] of [["Download SVG", "image/svg+xml"], ["Download PNG", "image/png"]]) {
    const href = await page.getByRole("link", { name, exact: true }).getAttribute("href");
    const res = await page.request.get(new URL(href, DASHBOARD_URL).toString());
    assert.equal(res.status(), 200, `${name} answers 200`);
    assert.ok(res.headers()["content-type"].startsWith(type), `${name} is ${type}`);
  }
  const chart = page.getByRole("img", { name: "Clicks per day" });
  assert.equal(await chart.count(), 1, "the chart, named Clicks per day");
  assert.equal(await page.getByRole("img", { name: "Unique visitors per day" }).count(), 1, "the visitors' chart");
  const CAPTIONS = ["By country", "By region", "By city", "By device", "By browser", "By OS", "By referrer",
    "By UTM source", "By UTM medium", "By UTM campaign"];
  for (const caption of CAPTIONS) await tableRows(page, caption);
  // The worker reports clicks after the redirect; reload until the page counts them. The chart's accessible name
  // is its title and its description, which gives the total.
  await poll(
    async () => {
      await page.reload();
      return (await page.getByRole("img", { name: `Clicks per day ${VISITS} clicks from` }).count()) === 1;
    },
    `the chart says ${VISITS} clicks`,
    { ms: CLICKS_MS },
  );
  const countries = await tableRows(page, "By country");
  assert.deepEqual(countries, [["DE", String(VISITS)]], "clicks by country");
  const devices = await tableRows(page, "By device");
  assert.deepEqual(devices, [["desktop", "3"], ["mobile", "1"]], "clicks by device");
  const referrers = await tableRows(page, "By referrer");
  assert.equal(referrers.length, 1, `one referrer: ${JSON.stringify(referrers)}`);
  assert.ok(referrers[0][0].includes("news.example.org"), `the referrer's site: ${JSON.stringify(referrers)}`);
  assert.deepEqual(await tableRows(page, "By browser"), [["chrome", "3"], ["safari", "1"]], "clicks by browser");
  assert.deepEqual(await tableRows(page, "By OS"), [["windows", "3"], ["ios", "1"]], "clicks by OS");
  assert.deepEqual(await tableRows(page, "By region"), [["Bavaria, DE", String(VISITS)]], "clicks by region");
  assert.deepEqual(await tableRows(page, "By city"), [["Munich, DE", String(VISITS)]], "clicks by city");
  assert.deepEqual(await tableRows(page, "By UTM source"), [["None", "3"], ["newsletter", "1"]], "utm_source");
  assert.deepEqual(await tableRows(page, "By UTM campaign"), [["None", "3"], ["spring", "1"]], "utm_campaign");
  // Two addresses with one browser, and the second address again with an iPhone: three visitors.
  assert.equal((await page.locator("#stats-total").textContent()).trim(), String(VISITS), "the total");
  await poll(async () => {
    await page.reload();
    return (await page.locator("#stats-uniques").textContent()).trim() === "3";
  }, "three unique visitors", { ms: CLICKS_MS });
  assert.equal((await page.locator("#stats-bots").textContent()).trim(), "0", "no bots");
  await shoot(page, "link");

  step("the link's page: a date range (From, To, Apply) and Export clicks");
  const todayIso = new Date().toISOString().slice(0, 10);
  await page.getByLabel("From", { exact: true }).fill("2020-01-01");
  await page.getByLabel("To", { exact: true }).fill("2020-01-31");
  await page.getByRole("button", { name: "Apply", exact: true }).click();
  await page.waitForURL(/from=2020-01-01&to=2020-01-31$/);
  assert.equal((await page.locator("#stats-total").textContent()).trim(), "0", "no clicks in January 2020");
  assert.deepEqual(await tableRows(page, "By country"), [["No clicks yet"]], "an empty range's tables");
  // A range the API refuses: its message, and the last 30 days instead.
  await page.getByLabel("From", { exact: true }).fill(todayIso);
  await page.getByLabel("To", { exact: true }).fill("2020-01-31");
  await page.getByRole("button", { name: "Apply", exact: true }).click();
  await page.waitForURL(/to=2020-01-31$/);
  await expectText(page, "from must not be after to. Showing the last 30 days.");
  assert.equal((await page.locator("#stats-total").textContent()).trim(), String(VISITS), "the default range again");
  await page.getByLabel("From", { exact: true }).fill(todayIso);
  await page.getByLabel("To", { exact: true }).fill(todayIso);
  await page.getByRole("button", { name: "Apply", exact: true }).click();
  await page.waitForURL(new RegExp(`from=${todayIso}&to=${todayIso}$`));
  assert.equal((await page.locator("#stats-total").textContent()).trim(), String(VISITS), "today's clicks");
  await shoot(page, "link-range");
  const clicksHref = await page.getByRole("link", { name: "Export clicks", exact: true }).getAttribute("href");
  const exported = await page.request.get(new URL(clicksHref, DASHBOARD_URL).toString());
  assert.equal(exported.status(), 200, "Export clicks answers 200");
  assert.ok(exported.headers()["content-type"].startsWith("text/csv"), "as CSV");
  const csvLines = (await exported.text()).trim().split("\r\n");
  assert.equal(csvLines[0], "at,link_id,country,region,city,device,browser,os,referer_host,utm_source,utm_medium,utm_campaign,unique");
  assert.equal(csvLines.length, 1 + VISITS, `a row per click: ${csvLines.join(" | ")}`);
  assert.deepEqual(csvLines.slice(1).map((l) => l.split(",").pop()).sort(), ["false", "true", "true", "true"], "first visits");
  assert.ok(csvLines.slice(1).every((l) => l.includes(",DE,Bavaria,Munich,")), "each row's place");

  step("the link's page: the Live panel counts new visits without a reload");
  assert.equal(await page.getByRole("img", { name: /^Clicks per minute/ }).count(), 1, "the live chart, named Clicks per minute");
  await expectText(page, `${VISITS} clicks in the last 60 minutes`);
  // A mark on this document: gone after a reload, so a panel that updates while it is there updated without one.
  await page.evaluate(() => { window.__livePage = true; });
  const MORE = 2;
  for (let i = 0; i < MORE; i++) {
    const v = await visitEdge(`/${code}`, { "CF-IPCountry": "DE" });
    assert.ok([302, 307].includes(v.status), `live visit ${i + 1}: ${JSON.stringify(v)}`);
  }
  await poll(
    () => page.evaluate((want) => window.__livePage === true
      && document.getElementById("live-total")?.textContent === want
      && document.querySelector("#live-chart svg title")?.textContent === "Clicks per minute",
    `${VISITS + MORE} clicks in the last 60 minutes`),
    "the Live panel counts the new visits without a reload",
    { ms: CLICKS_MS },
  );
  await shoot(page, "link-live");
  await page.goto(new URL("/dashboard/", DASHBOARD_URL).toString());
  const today = Number((await page.locator("#today-clicks strong").textContent()).trim());
  assert.ok(today >= VISITS + MORE, `the Links page shows today's clicks: ${today}`);

  step("the account's Analytics page and the group's page: the same statistics, every dimension");
  await nav(page, "Analytics").click();
  await expectHeading(page, "Analytics");
  const accountTotal = Number((await page.locator("#stats-total").textContent()).trim());
  assert.ok(accountTotal >= VISITS + MORE, `the account's clicks: ${accountTotal}`);
  for (const caption of CAPTIONS) await tableRows(page, caption);
  assert.ok((await tableRows(page, "By city")).some(([city]) => city === "Munich, DE"), "the account's cities");
  await shoot(page, "analytics");
  await nav(page, "Groups").click();
  await page.getByRole("link", { name: groupName, exact: true }).first().click();
  await page.waitForURL(/\/dashboard\/groups\/[0-9a-f-]{36}$/);
  // Every click so far was in this group: its link's and its dynamic link's.
  assert.equal(Number((await page.locator("#stats-total").textContent()).trim()), accountTotal, "the group's clicks");
  for (const caption of CAPTIONS) await tableRows(page, caption);
  assert.equal(await page.getByRole("link", { name: "Export clicks", exact: true }).count(), 1, "the group's export");
  await page.goto(linkPageUrl);

  step("the link's page: edit the destination");
  const landing2 = "https://example.com/landing-2";
  await page.getByLabel("Destination URL", { exact: true }).fill(landing2);
  await page.getByRole("button", { name: "Save link" }).click();
  await page.waitForURL(/\?done=saved$/);
  assert.equal(await page.getByLabel("Destination URL", { exact: true }).inputValue(), landing2, "saved");
  await edgeRedirects(`/${code}`, landing2, "the edited destination at the edge");

  step("the link's page: a title and tags; the list searches, filters by tag and exports");
  const linkTitle = `Spring sale ${unique}`;
  await page.getByLabel("Title", { exact: true }).fill(linkTitle);
  await page.getByLabel("Tags", { exact: true }).fill(" promo, Mail , PROMO");
  await page.getByRole("button", { name: "Save link" }).click();
  await page.waitForURL(/\?done=saved$/);
  assert.equal(await page.getByLabel("Title", { exact: true }).inputValue(), linkTitle, "the title is saved");
  assert.equal(await page.getByLabel("Tags", { exact: true }).inputValue(), "Mail, promo", "tags merged and sorted");
  // A tag the rules refuse: the form says so and keeps what was typed.
  await page.getByLabel("Tags", { exact: true }).fill("promo, a/b");
  await page.getByRole("button", { name: "Save link" }).click();
  assert.equal(await page.getByRole("alert").count(), 1, "a refused tag is explained");
  assert.equal(await page.getByLabel("Tags", { exact: true }).inputValue(), "promo, a/b", "the typed tags stay");
  await page.goto(linkPageUrl);
  // A second link, without the tag, so that the filters have something to leave out.
  await nav(page, "Links").click();
  const other = "https://example.com/other-page";
  await page.getByLabel("Destination URL", { exact: true }).fill(other);
  await page.getByRole("button", { name: "Create link" }).click();
  await page.waitForURL("**/dashboard/?done=created");
  // Search: the title's words find the link, any case; the other link is left out.
  await page.getByLabel("Search", { exact: true }).fill(`SPRING SALE ${unique}`);
  await page.getByRole("button", { name: "Filter", exact: true }).click();
  await page.waitForURL(/[?&]q=/);
  assert.equal(await linkRow(page, landing2).count(), 1, "search finds the link by its title");
  assert.equal(await linkRow(page, other).count(), 0, "search leaves the other link out");
  const chips = linkRow(page, landing2).getByRole("list", { name: "Tags" }).getByRole("link");
  assert.deepEqual(await chips.allTextContents(), ["Mail", "promo"], "the row shows its tags as chips");
  await shoot(page, "links-search");
  // A search of one character: refused with the rule, no list.
  await page.getByLabel("Search", { exact: true }).fill("s");
  await page.getByRole("button", { name: "Filter", exact: true }).click();
  await page.getByRole("alert").waitFor();
  assert.ok((await page.getByRole("alert").textContent()).includes("Search must be 2 to 200 characters"), "the search rule");
  // The tag filter, from the select and from a chip.
  await page.goto(new URL("/dashboard/", DASHBOARD_URL).toString());
  await page.getByLabel("Tag", { exact: true }).selectOption({ label: "promo" });
  await page.getByLabel("Sort", { exact: true }).selectOption({ label: "Most clicks" });
  await page.getByRole("button", { name: "Filter", exact: true }).click();
  await page.waitForURL(/[?&]tag=promo/);
  assert.equal(await linkRow(page, landing2).count(), 1, "the tag filter keeps the tagged link");
  assert.equal(await linkRow(page, other).count(), 0, "and leaves the other out");
  assert.equal(await page.getByLabel("Tag", { exact: true }).inputValue(), "promo", "the filter shows what it filters by");
  await shoot(page, "links-tag");
  await page.goto(new URL("/dashboard/", DASHBOARD_URL).toString());
  await linkRow(page, landing2).getByRole("link", { name: "Mail", exact: true }).click();
  await page.waitForURL(/[?&]tag=Mail/);
  assert.equal(await linkRow(page, other).count(), 0, "a chip filters by its tag");
  // Export: the CSV of what the filters match.
  const exportHref = await page.getByRole("link", { name: "Export links", exact: true }).getAttribute("href");
  const csv = await page.request.get(new URL(exportHref, DASHBOARD_URL).toString());
  assert.equal(csv.status(), 200, "the export answers");
  assert.ok(csv.headers()["content-type"].startsWith("text/csv"), "as CSV");
  const lines = (await csv.text()).trim().split("\r\n");
  assert.ok(lines[0].startsWith("id,short_url,short_code,domain,long_url,title,tags,"), `the header: ${lines[0]}`);
  assert.equal(lines.length, 2, `the header and the one tagged link: ${lines.join(" / ")}`);
  assert.ok(lines[1].includes(linkTitle) && lines[1].includes("Mail|promo"), `the link's row: ${lines[1]}`);
  await page.goto(linkPageUrl);

  step("import: a CSV file, the progress bar moving without a reload, then the problems by row");
  await nav(page, "Links").click();
  await page.getByRole("link", { name: "Import links", exact: true }).click();
  await expectHeading(page, "Import links");
  await shoot(page, "import");
  const IMPORTED = 10_000;
  const importRows = [`long_url,short_code,title,tags,group`];
  for (let i = 0; i < IMPORTED; i++) importRows.push(`https://example.com/imported/${i},imp-${unique}-${i},Row ${i},bulk,Imported`);
  importRows.push("http://example.com/not-https,,,,", "https://example.com/bad-tag,,,a/b,");
  await page.getByLabel("CSV file", { exact: true }).setInputFiles({
    name: "links.csv",
    mimeType: "text/csv",
    buffer: Buffer.from(importRows.join("\r\n") + "\r\n"),
  });
  await page.getByRole("button", { name: "Import", exact: true }).click();
  await page.waitForURL(/\/dashboard\/links\/imports\/[0-9a-f-]{36}$/);
  const importUrl = page.url();
  const bar = page.locator("progress#import-progress");
  assert.equal(await bar.getAttribute("max"), String(IMPORTED + 2), "the bar's end is the file's rows");
  // A mark on this document: gone after a reload, so a bar that moves while it is there moved without one.
  await page.evaluate(() => { window.__importPage = true; });
  let movedInPlace = false;
  let reloadedMidway = false;
  let midwayValue = -1;
  await poll(
    async () => {
      const seen = await page.evaluate(() => {
        const p = document.querySelector("progress#import-progress");
        return { same: window.__importPage === true, value: p ? p.value : -1, max: p ? p.max : -1,
                 done: document.querySelector("h2#import-state")?.textContent === "Done" };
      }).catch(() => ({ same: false, value: -1, max: -1, done: false }));
      if (seen.same && seen.value > 0 && seen.value < seen.max) movedInPlace = true;
      // Once, mid-way: a reload shows where the job is (the page is right without its script too).
      if (movedInPlace && !reloadedMidway && !seen.done) {
        reloadedMidway = true;
        await page.reload();
        midwayValue = Number(await bar.getAttribute("value"));
        await shoot(page, "import-running");
        await page.evaluate(() => { window.__importPage = true; });
      }
      return seen.done;
    },
    "the import reaches the end",
    { ms: 240_000 },
  );
  assert.ok(movedInPlace, "the progress bar moved while the job ran, without a reload");
  assert.ok(midwayValue > 0 && midwayValue <= IMPORTED + 2, `on reload mid-way the bar shows the progress: ${midwayValue}`);
  assert.equal(await bar.getAttribute("value"), String(IMPORTED + 2), "the bar at its end");
  await expectText(page, `${IMPORTED} links created, 2 rows refused`);
  const importProblems = await tableRows(page, "Problems by row");
  assert.deepEqual(importProblems.map((r) => r.slice(0, 2)), [[String(IMPORTED + 2), "validation_error"], [String(IMPORTED + 3), "validation_error"]], JSON.stringify(importProblems));
  await shoot(page, "import-done");
  await page.goto(importUrl);
  assert.equal(await bar.getAttribute("value"), String(IMPORTED + 2), "right on reload");
  await page.goto(new URL(`/dashboard/?q=imp-${unique}-999`, DASHBOARD_URL).toString());
  // imp-…-999 and imp-…-9990 to 9999.
  assert.equal(await page.locator("table.links tbody tr").count(), 11, "the imported links are listed and found");
  await page.goto(linkPageUrl);

  step("the link's page: smart-link fields (rules with Add rule, Move up, Remove; password; redirect type; preview card)");
  const rule = (n) => page.getByRole("group", { name: new RegExp(`^Rule ${n} `) });
  const saveLink = () => page.getByRole("button", { name: "Save link", exact: true }).click();
  await page.getByRole("button", { name: "Add rule", exact: true }).click();
  await rule(1).waitFor();
  await rule(1).getByLabel("Countries", { exact: true }).fill("de, at");
  await rule(1).getByRole("checkbox", { name: "Mobile", exact: true }).check();
  await rule(1).getByLabel("Go to", { exact: true }).fill("https://example.com/dach");
  await page.getByLabel("Preview title", { exact: true }).fill(`Spring card ${unique}`);
  await page.getByRole("button", { name: "Add rule", exact: true }).click();
  await rule(2).waitFor();
  // The buttons save nothing and keep what was typed, in the rows and elsewhere.
  await expectText(page, "Not saved yet");
  assert.equal(await rule(1).getByLabel("Countries", { exact: true }).inputValue(), "de, at", "rule 1 as typed");
  assert.ok(await rule(1).getByRole("checkbox", { name: "Mobile", exact: true }).isChecked(), "its checkbox too");
  assert.equal(await page.getByLabel("Preview title", { exact: true }).inputValue(), `Spring card ${unique}`, "other fields as typed");
  const landingDe = "https://example.com/deutsch";
  await rule(2).getByLabel("Languages", { exact: true }).fill("de");
  await rule(2).getByLabel("Go to", { exact: true }).fill(landingDe);
  await shoot(page, "link-rules");
  await rule(2).getByRole("button", { name: "Move up", exact: true }).click();
  await page.waitForLoadState();
  assert.equal(await rule(1).getByLabel("Go to", { exact: true }).inputValue(), landingDe, "Move up: the language rule is first");
  assert.equal(await rule(2).getByLabel("Go to", { exact: true }).inputValue(), "https://example.com/dach");
  await rule(2).getByRole("button", { name: "Remove", exact: true }).click();
  await page.waitForLoadState();
  assert.equal(await rule(2).count(), 0, "Remove: one rule left");
  // A refused rule: the API's message naming its place, the input kept.
  await rule(1).getByLabel("Countries", { exact: true }).fill("DEU");
  await saveLink();
  await page.getByRole("alert").waitFor();
  const refusal = await page.getByRole("alert").textContent();
  assert.ok(refusal.includes('rules[0].if.country[0]: "DEU" is not an ISO 3166-1 alpha-2 country code'), refusal);
  assert.equal(await rule(1).getByLabel("Countries", { exact: true }).inputValue(), "DEU", "the typed value stays");
  await shoot(page, "link-rules-refused");
  await rule(1).getByLabel("Countries", { exact: true }).fill("");
  await page.getByLabel("Password", { exact: true }).fill("correct battery staple 7");
  await page.getByLabel("Redirect type", { exact: true }).selectOption("308");
  await page.getByLabel("Preview title", { exact: true }).fill(`Spring card ${unique}`);
  await page.getByLabel("Preview description", { exact: true }).fill("Half price, this week only.");
  await page.getByLabel("Preview image URL", { exact: true }).fill("https://example.com/card.png");
  await page.getByLabel("Expired URL", { exact: true }).fill("https://example.com/sold-out");
  await saveLink();
  await page.waitForURL(/\?done=saved$/);
  await page.reload();
  assert.equal(await rule(1).getByLabel("Languages", { exact: true }).inputValue(), "de", "the rule is saved");
  assert.equal(await rule(1).getByLabel("Go to", { exact: true }).inputValue(), landingDe);
  assert.equal(await rule(2).count(), 0);
  await expectText(page, "Password: Set");
  assert.equal(await page.getByLabel("New password", { exact: true }).inputValue(), "", "the password is never shown");
  assert.equal(await page.getByLabel("Redirect type", { exact: true }).inputValue(), "308");
  assert.equal(await page.getByLabel("Preview title", { exact: true }).inputValue(), `Spring card ${unique}`);
  assert.equal(await page.getByLabel("Preview description", { exact: true }).inputValue(), "Half price, this week only.");
  assert.equal(await page.getByLabel("Preview image URL", { exact: true }).inputValue(), "https://example.com/card.png");
  assert.equal(await page.getByLabel("Expired URL", { exact: true }).inputValue(), "https://example.com/sold-out");
  await shoot(page, "link-smart-saved");
  // "Remove password": the link opens again at the edge, where the language rule answers with the 308 chosen.
  await page.getByRole("checkbox", { name: "Remove password", exact: true }).check();
  await saveLink();
  await page.waitForURL(/\?done=saved$/);
  await expectText(page, "Password: None");
  await poll(() => visitEdge(`/${code}`, { "Accept-Language": "de-DE,de;q=0.9" }, "HEAD"), "the language rule at the edge, 308", {
    until: (v) => v.status === 308 && v.location === landingDe,
  });
  await poll(() => visitEdge(`/${code}`, { "Accept-Language": "fr" }, "HEAD"), "other visitors get the destination, 308", {
    until: (v) => v.status === 308 && v.location === landing2,
  });

  step("the link's page: delete");
  await page.getByRole("button", { name: "Delete", exact: true }).click();
  await expectHeading(page, `Delete ${shortUrl}?`);
  await shoot(page, "confirm-delete-link");
  await page.getByRole("button", { name: "Delete link" }).click();
  await page.waitForURL("**/dashboard/?done=deleted");
  assert.equal(await linkRow(page, landing2).count(), 0, "the row is gone");
  await edgeFallsBack(`/${code}`, landing2, "a deleted link no longer redirects at the edge");
  const gone = await page.goto(linkPageUrl);
  assert.equal(gone.status(), 404, "the deleted link's page is not found");
  await shoot(page, "not-found");

  // -------------------------------------------------------------------------------------------------------------
  step("XSS: markup in a destination and in a group name is shown as text");
  // A second context without CSP, so that only the page's escaping stands between the text and the DOM (with the
  // CSP on, an injected inline script would be refused even if it were not escaped).
  const bare = await browser.newContext({ viewport: DESKTOP, bypassCSP: true, storageState: await context.storageState() });
  const xss = await bare.newPage();
  xss.setDefaultTimeout(15_000);
  watch(xss);
  await xss.goto(`${DASHBOARD_URL}/dashboard/`);
  let hostile = 'https://example.com/?q="><script>window.__xss=1</script>';
  await xss.getByLabel("Destination URL", { exact: true }).fill(hostile);
  await xss.getByRole("button", { name: "Create link" }).click();
  await xss.waitForLoadState();
  if (!xss.url().endsWith("?done=created")) {
    // The server refused the raw characters: it must say so next to the field, echoing the text safely.
    const refusal = (await xss.getByRole("alert").allTextContents()).join(" ") +
      (await xss.getByText("destination URL", { exact: false }).allTextContents()).join(" ");
    console.log(`   raw markup refused (${refusal.trim()}); using the percent-encoded form`);
    assert.equal(await xss.getByLabel("Destination URL", { exact: true }).inputValue(), hostile, "the form keeps what was typed");
    hostile = "https://example.com/?q=%22%3E%3Cscript%3Ewindow.__xss=1%3C/script%3E";
    await xss.getByLabel("Destination URL", { exact: true }).fill(hostile);
    await xss.getByRole("button", { name: "Create link" }).click();
    await xss.waitForURL("**/dashboard/?done=created");
  }
  assert.equal(await linkRow(xss, hostile).count(), 1, "the destination is shown literally as the link's text");
  await assertNoXss(xss);
  await shoot(xss, "xss-links");
  await linkRow(xss, hostile).getByRole("link", { name: hostile, exact: true }).click();
  await xss.waitForURL(/\/dashboard\/links\//);
  assert.equal(await xss.getByLabel("Destination URL", { exact: true }).inputValue(), hostile, "the edit field holds it literally");
  await assertNoXss(xss);
  await shoot(xss, "xss-link");

  const hostileGroup = `"><img src=x onerror="window.__xss=1">`;
  await xss.goto(`${DASHBOARD_URL}/dashboard/groups`);
  await xss.getByLabel("Group name", { exact: true }).fill(hostileGroup);
  await xss.getByRole("button", { name: "Create group" }).click();
  await xss.waitForURL(/\?done=created$/);
  await expectHeading(xss, hostileGroup);
  await assertNoXss(xss);
  const hostileGroupPage = xss.url();
  await xss.goto(`${DASHBOARD_URL}/dashboard/groups`);
  assert.equal(await xss.getByRole("link", { name: hostileGroup, exact: true }).count(), 1, "the group name is a link's text");
  await assertNoXss(xss);
  await shoot(xss, "xss-groups");
  await xss.goto(`${DASHBOARD_URL}/dashboard/`);
  assert.ok(
    (await xss.getByLabel("Group", { exact: true }).getByRole("option").allTextContents()).includes(hostileGroup),
    "the group name is an option's text",
  );
  await assertNoXss(xss);
  // The confirmation names the group in its heading and title; then the group goes.
  await xss.goto(hostileGroupPage);
  await xss.getByRole("button", { name: "Delete group" }).click();
  await expectHeading(xss, `Delete ${hostileGroup}?`);
  await assertNoXss(xss);
  await shoot(xss, "confirm-delete-group");
  await xss.getByLabel("Your password", { exact: true }).fill(password);
  await xss.getByRole("button", { name: "Delete group" }).click();
  await xss.waitForURL("**/dashboard/groups?done=deleted");
  assert.equal(await xss.getByRole("link", { name: hostileGroup, exact: true }).count(), 0, "the group is gone");
  await bare.close();

  // -------------------------------------------------------------------------------------------------------------
  step("domains and profile");
  await page.goto(`${DASHBOARD_URL}/dashboard/`);
  await nav(page, "Domains").click();
  await expectHeading(page, "Domains");
  const domains = await tableRows(page, "Domains your links can use");
  assert.deepEqual(
    domains.find((r) => r[0] === EDGE_HOST),
    [EDGE_HOST, "Platform", "Active"],
    `the platform domain is listed: ${JSON.stringify(domains)}`,
  );
  await shoot(page, "domains");

  await nav(page, "Profile").click();
  await expectHeading(page, "Profile");
  await expectText(page, ACCOUNT_EMAIL);
  await shoot(page, "profile");
  // A wrong current password is refused.
  await page.getByLabel("Current password", { exact: true }).fill("not-the-password-at-all");
  await page.getByLabel("New password", { exact: true }).fill(newPassword);
  await page.getByLabel("Confirm password", { exact: true }).fill(newPassword);
  await page.getByRole("button", { name: "Change password" }).click();
  await page.waitForLoadState();
  assert.ok((await page.getByRole("alert").count()) > 0, "an error for a wrong current password");
  await shoot(page, "profile-error");
  await page.getByLabel("Current password", { exact: true }).fill(password);
  await page.getByLabel("New password", { exact: true }).fill(newPassword);
  await page.getByLabel("Confirm password", { exact: true }).fill(newPassword);
  await page.getByRole("button", { name: "Change password" }).click();
  await page.waitForURL("**/dashboard/profile?done=password");
  await expectText(page, "Your password is changed.");
  // The new password is the one that works now.
  await signOut(page);
  await signIn(page, ACCOUNT_EMAIL, password);
  await expectText(page, "Wrong email or password.");
  await signIn(page, ACCOUNT_EMAIL, newPassword);
  await page.waitForURL(`${DASHBOARD_URL}/dashboard/`);
  await expectSignedIn(page);

  // -------------------------------------------------------------------------------------------------------------
  step("webhooks: add an endpoint, its secret shown once, a test event signed and in the delivery log");
  await nav(page, "Webhooks").click();
  await expectHeading(page, "Webhooks");
  await shoot(page, "webhooks-empty");
  // A URL the operator did not allow is refused, and what was typed stays.
  await page.getByLabel("Endpoint URL", { exact: true }).fill("ftp://files.example.com/hook");
  await page.getByLabel("Description", { exact: true }).fill("CRM sync");
  await page.getByLabel("link.created", { exact: true }).check();
  await page.getByRole("button", { name: "Add endpoint" }).click();
  await page.getByRole("alert").waitFor();
  assert.equal(await page.getByLabel("Description", { exact: true }).inputValue(), "CRM sync", "the form keeps what was typed");
  assert.ok(await page.getByLabel("link.created", { exact: true }).isChecked(), "the ticked event stays ticked");
  await shoot(page, "webhooks-error");
  await page.getByLabel("Endpoint URL", { exact: true }).fill(RECEIVER_URL);
  await page.getByLabel("link.updated", { exact: true }).check();
  await page.getByRole("button", { name: "Add endpoint" }).click();
  // The answer is the endpoint's page with its secret, once (a refusal would be an alert on the list page).
  await page.waitForLoadState();
  const refused = page.getByRole("alert");
  if (await refused.count()) assert.fail(`the endpoint was refused: ${await refused.allTextContents()}`);
  await expectHeading(page, RECEIVER_URL);
  const secretField = page.getByLabel("Signing secret", { exact: true });
  assert.equal(await secretField.getAttribute("readonly"), "", "the secret's field is read-only");
  const signingSecret = await secretField.inputValue();
  assert.match(signingSecret, /^whsec_[A-Za-z0-9+/]{43}=$/, "a Standard Webhooks secret");
  assert.ok(await page.getByRole("button", { name: "Copy signing secret" }).isVisible(), "the copy button is shown");
  await shoot(page, "webhook-created");
  // Back to the list and into the endpoint again: no secret any more.
  await nav(page, "Webhooks").click();
  await expectHeading(page, "Webhooks");
  await page.getByRole("link", { name: RECEIVER_URL, exact: true }).click();
  await expectHeading(page, RECEIVER_URL);
  assert.match(new URL(page.url()).pathname, /^\/dashboard\/webhooks\/[0-9a-f-]{36}$/, "the endpoint's own page");
  assert.equal(await page.getByLabel("Signing secret", { exact: true }).count(), 0, "the secret is never shown again");
  assert.ok(!(await page.content()).includes(signingSecret), "nor anywhere in the page");
  // A test event now: signed with that secret, and in the log.
  const before = received.length;
  await page.getByRole("button", { name: "Send test event" }).click();
  await expectText(page, "Test event delivered");
  const pings = received.slice(before);
  assert.equal(pings.length, 1, `one request for the test: ${JSON.stringify(pings.map((r) => r.body))}`);
  assert.equal(pings[0].path, "/hooks/shortlink");
  const ping = verifiedWebhook(pings[0], signingSecret);
  assert.equal(ping.event.type, "ping");
  const log = await tableRows(page, "Deliveries");
  assert.equal(log.length, 1, `one attempt in the log: ${JSON.stringify(log)}`);
  assert.equal(log[0][1], "ping", "the event type");
  assert.equal(log[0][2], "1", "the first attempt");
  assert.equal(log[0][3], "200", "the receiver's status");
  assert.ok(log[0][5].includes("Delivered"), `delivered: ${JSON.stringify(log[0])}`);
  await shoot(page, "webhook-deliveries");
  await nav(page, "Webhooks").click();
  const endpoints = await tableRows(page, "Webhook endpoints");
  assert.equal(endpoints.length, 1, `one endpoint: ${JSON.stringify(endpoints)}`);
  assert.ok(endpoints[0].join(" ").includes(RECEIVER_URL) && endpoints[0].join(" ").includes("CRM sync"), JSON.stringify(endpoints));
  assert.ok(!(await page.content()).includes(signingSecret), "the list never shows the secret");
  await shoot(page, "webhooks");
  await nav(page, "Links").click();
  await expectHeading(page, "Links");

  // -------------------------------------------------------------------------------------------------------------
  step("teams: the owner invites a viewer and a member");
  const viewerEmail = process.env.VIEWER_EMAIL || `viewer-${unique}@example.com`;
  const memberEmail = process.env.MEMBER_EMAIL || `member-${unique}@example.com`;
  const viewerPassword = `viewer-${unique}-password`;
  const memberPassword = `member-${unique}-password`;
  // What a member's create form sends, read from the owner's form: the viewer's forged post below sends the same.
  const formGroupId = await page.getByLabel("Group", { exact: true }).inputValue();
  const formDomainId = await page
    .getByLabel("Domain", { exact: true })
    .getByRole("option", { name: EDGE_HOST, exact: true })
    .getAttribute("value");
  await expectNavFor(page, "owner");
  await nav(page, "Members").click();
  await expectHeading(page, "Members");
  const accountName = ((await page.getByRole("heading", { level: 2, name: "People in " }).textContent()) ?? "")
    .replace(/^People in /, "")
    .trim();
  assert.ok(accountName, "the Members page names the account");
  assert.deepEqual(
    (await tableRows(page, `Members of ${accountName}`)).map((r) => [r[0], r[1]]),
    [[`${ACCOUNT_EMAIL} You`, "owner"]],
    "the owner alone is a member",
  );
  await shoot(page, "members-alone");
  const viewerLink = await inviteMember(page, viewerEmail, "viewer");
  const memberLink = await inviteMember(page, memberEmail, "member");
  assert.notEqual(viewerLink, memberLink, "two invitations, two links");
  // Each invitation was mailed to its person, with the very link the page showed.
  for (const [email, role, link] of [
    [viewerEmail, "viewer", viewerLink],
    [memberEmail, "member", memberLink],
  ]) {
    const mail = await mailTo(email, `You are invited to join ${accountName} on Shortlink`);
    assert.equal(linkIn(mail, `${DASHBOARD_URL}/dashboard/invite/`), link, `the mailed invitation for ${email}`);
    assert.ok(mail.body.includes(`as ${role}`), `the mail names the role ${role}:\n${mail.body}`);
  }
  await expectText(page, "Invitations not yet accepted");
  await shoot(page, "members-invited");

  /** A second person: their own browser context, which opens `link` and accepts with a new password. */
  async function acceptInvitation(link, email, role, personPassword, screenshot) {
    const ctx = await browser.newContext({ viewport: DESKTOP, userAgent: BROWSER_UA });
    const p = await ctx.newPage();
    p.setDefaultTimeout(15_000);
    watch(p);
    await p.goto(link);
    await expectHeading(p, `Join ${accountName}`);
    await expectText(p, email);
    assert.equal(await p.getByRole("navigation", { name: "Main" }).count(), 0, "no navigation before joining");
    if (screenshot) await shoot(p, screenshot);
    await p.getByLabel("New password", { exact: true }).fill(personPassword);
    await p.getByLabel("Confirm password", { exact: true }).fill(personPassword);
    await p.getByRole("button", { name: "Accept invitation" }).click();
    await p.waitForURL(`${DASHBOARD_URL}/dashboard/?done=joined`);
    await expectHeading(p, "Links");
    await expectNavFor(p, role);
    return { ctx, page: p };
  }

  // -------------------------------------------------------------------------------------------------------------
  step("teams: the viewer joins, sees the links, has no create form, and a forged post is refused");
  const viewer = await acceptInvitation(viewerLink, viewerEmail, "viewer", viewerPassword, "invite-member");
  const vp = viewer.page;
  assert.equal(await linkRow(vp, hostile).count(), 1, "the viewer sees the account's links");
  assert.equal(await vp.getByRole("button", { name: "Create link" }).count(), 0, "no Create link button for a viewer");
  assert.equal(await vp.getByLabel("Destination URL", { exact: true }).count(), 0, "no Destination URL field for a viewer");
  assert.equal(await vp.getByRole("heading", { name: "New link" }).count(), 0, "no New link form for a viewer");
  for (const name of ["Pause", "Resume", "Delete"]) {
    assert.equal(await vp.getByRole("button", { name, exact: true }).count(), 0, `no ${name} button for a viewer`);
  }
  await shoot(vp, "links-viewer");
  // The post a member's create form makes, with the viewer's own valid CSRF token (from the page's Sign out form):
  // only the role can refuse it.
  const forgedDestination = `https://example.com/forged-${unique}`;
  const forgedResponse = vp.waitForResponse(
    (r) => r.url() === `${DASHBOARD_URL}/dashboard/links` && r.request().method() === "POST",
  );
  await vp.evaluate(
    ({ longUrl, groupId: g, domainId: d }) => {
      const form = document.createElement("form");
      form.method = "post";
      form.action = "/dashboard/links";
      const csrf = document.querySelector('input[name="csrf"]').value;
      for (const [name, value] of Object.entries({ csrf, long_url: longUrl, short_code: "", group_id: g, domain_id: d })) {
        const input = document.createElement("input");
        input.type = "hidden";
        input.name = name;
        input.value = value;
        form.append(input);
      }
      document.body.append(form);
      form.submit();
    },
    { longUrl: forgedDestination, groupId: formGroupId, domainId: formDomainId },
  );
  assert.equal((await forgedResponse).status(), 403, "a viewer's forged create is refused with 403");
  await expectHeading(vp, "Not allowed");
  await expectText(vp, "Your role in this account does not allow this.");
  await shoot(vp, "forbidden");
  await vp.goto(`${DASHBOARD_URL}/dashboard/`);
  assert.equal(await linkRow(vp, forgedDestination).count(), 0, "the forged link was not made");

  // -------------------------------------------------------------------------------------------------------------
  step("teams: the member joins, creates a link and pauses it");
  const member = await acceptInvitation(memberLink, memberEmail, "member", memberPassword);
  const mp = member.page;
  const teamCode = `team-${unique}`;
  const teamLanding = "https://example.com/team";
  const teamShortUrl = `https://${EDGE_HOST}/${teamCode}`;
  await mp.getByLabel("Destination URL", { exact: true }).fill(teamLanding);
  await mp.getByLabel("Short code", { exact: true }).fill(teamCode);
  await mp.getByLabel("Domain", { exact: true }).selectOption({ label: EDGE_HOST });
  await mp.getByRole("button", { name: "Create link" }).click();
  await mp.waitForURL("**/dashboard/?done=created");
  assert.equal(
    await linkRow(mp, teamLanding).getByRole("textbox", { name: "Short URL" }).inputValue(),
    teamShortUrl,
    "the member's link and its short URL",
  );
  await shoot(mp, "links-member");
  await edgeRedirects(`/${teamCode}`, teamLanding, "the member's link redirects at the edge");
  await linkRow(mp, teamLanding).getByRole("button", { name: "Pause" }).click();
  await mp.waitForURL("**/dashboard/?done=paused");
  assert.ok((await linkRow(mp, teamLanding).textContent()).includes("Paused"), "the member's link is paused");
  await edgeFallsBack(`/${teamCode}`, teamLanding, "the member's paused link sends visitors to the fallback");

  // -------------------------------------------------------------------------------------------------------------
  step("teams: the owner sees who did what in Activity");
  await nav(page, "Activity").click();
  await expectHeading(page, "Activity");
  const activity = await tableRows(page, "Changes to this account, newest first");
  const at = (who, what, target) =>
    activity.findIndex((r) => r[1] === who && r[2] === what && (target === undefined || r[3] === target));
  const paused = at(memberEmail, "link.paused", teamShortUrl);
  const created = at(memberEmail, "link.created", teamShortUrl);
  const show = JSON.stringify(activity.slice(0, 12), null, 1);
  assert.ok(paused >= 0, `the member's link.paused in Activity: ${show}`);
  assert.ok(created >= 0, `the member's link.created in Activity: ${show}`);
  assert.ok(paused < created, `newest first: link.paused above link.created: ${show}`);
  assert.ok(paused === 0, `the member's pause is the newest change: ${show}`);
  for (const [who, what, target] of [
    [ACCOUNT_EMAIL, "member.invited", viewerEmail],
    [ACCOUNT_EMAIL, "member.invited", memberEmail],
    [viewerEmail, "member.joined", viewerEmail],
    [memberEmail, "member.joined", memberEmail],
  ]) {
    assert.ok(at(who, what, target) >= 0, `${what} of ${target} by ${who} in Activity: ${show}`);
  }
  assert.equal(at(viewerEmail, "link.created"), -1, "the viewer's refused post left no activity");
  assert.match(activity[0][0], /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/, "times in UTC");
  await shoot(page, "activity");

  // -------------------------------------------------------------------------------------------------------------
  step("teams: the owner removes the member, whose next page load has lost the account");
  await nav(page, "Members").click();
  await expectHeading(page, "Members");
  const people = await tableRows(page, `Members of ${accountName}`);
  for (const [email, role] of [[viewerEmail, "viewer"], [memberEmail, "member"]]) {
    assert.ok(people.some((r) => r[0] === email && r[1] === role), `${email} is a ${role}: ${JSON.stringify(people)}`);
  }
  const memberRow = page.getByRole("row").filter({ has: page.getByRole("cell", { name: memberEmail, exact: true }) });
  assert.equal(await memberRow.count(), 1, "the member's row");
  assert.equal(
    await memberRow.getByLabel("Change role", { exact: true }).inputValue(),
    "member",
    "the row's Change role select holds the member's role",
  );
  assert.equal(await memberRow.getByRole("button", { name: "Save role" }).count(), 1, "the row's Save role button");
  await shoot(page, "members");
  await memberRow.getByRole("button", { name: "Remove member" }).click();
  await expectHeading(page, `Remove ${memberEmail}?`);
  await shoot(page, "confirm-remove-member");
  await page.getByRole("button", { name: "Remove member" }).click();
  await page.waitForURL("**/dashboard/members?done=removed");
  await expectText(page, "Member removed.");
  assert.ok(
    !(await tableRows(page, `Members of ${accountName}`)).some((r) => r[0] === memberEmail),
    "the member is no longer listed",
  );
  // The member's browser still has its session; the next page load finds no account.
  const lost = await mp.reload();
  assert.equal(lost.status(), 403, "the removed member's next page load is refused");
  await expectHeading(mp, "No account");
  await expectText(mp, "not a member of any account any more");
  assert.equal(await mp.getByRole("navigation", { name: "Main" }).count(), 0, "no navigation without an account");
  assert.equal(await linkRow(mp, teamLanding).count(), 0, "no links without an account");
  await shoot(mp, "no-account");
  // The viewer is unaffected.
  await vp.reload();
  await expectHeading(vp, "Links");
  await expectNavFor(vp, "viewer");
  await member.ctx.close();
  await viewer.ctx.close();

  // -------------------------------------------------------------------------------------------------------------
  step("webhooks: the member's new link reached the receiver, signed");
  const createdEvent = await poll(
    () =>
      received
        .filter((r) => r.headers["webhook-id"])
        .map((r) => verifiedWebhook(r, signingSecret).event)
        .find((e) => e.type === "link.created" && e.data.short_code === teamCode && e.data.domain === EDGE_HOST),
    `link.created of ${teamShortUrl} at the receiver`,
    { ms: 20_000 },
  );
  assert.equal(createdEvent.data.long_url, teamLanding, "the link as listed");

  // -------------------------------------------------------------------------------------------------------------
  step("browser and accessibility problems");
  const problems = [];
  if (browserProblems.length) problems.push(`browser problems:\n  ${browserProblems.join("\n  ")}`);
  for (const [problem, pages] of axeProblems) {
    problems.push(`axe violation on ${pages.join(", ")}:\n  ${problem}`);
  }
  assert.ok(problems.length === 0, problems.join("\n"));
  console.log(`\nall dashboard flows passed in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${SCREENSHOT_DIR}`);
} finally {
  await browser.close();
  receiver.closeAllConnections();
  receiver.close();
}
