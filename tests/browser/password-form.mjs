// A password-protected link's form at the edge, in real Chromium (issue 25): the form the worker serves, a wrong
// password, the right one, the browser following the 303 with its new cookie to the destination, the cookie's
// attributes as the browser stored them, and the link opening at once on the next visit. Screenshots at 1280 and
// 390 px wide go to SCREENSHOT_DIR.
//
// The cookie is `Secure`, so the browser must reach the link over HTTPS, as on Cloudflare: a small TLS proxy here
// (the certificate made by the test, for EDGE_HOST) forwards to the worker over HTTP with the Host header kept and
// CF-Connecting-IP set, as Cloudflare's edge would; Chromium resolves EDGE_HOST to the proxy and trusts the
// certificate (--ignore-certificate-errors). The destination's host is answered by the proxy too (no network).
//
// Run by tests/tests/propagation.rs (`password_form_in_chromium`), which starts the origin and the worker and
// protects the link. Environment: EDGE_URL (the worker, http), EDGE_HOST, LINK_PATH (`/<code>`), PASSWORD,
// DESTINATION (the link's long_url), TLS_CERT and TLS_KEY (PEM files), SCREENSHOT_DIR, CHROMIUM (default
// /usr/bin/chromium).
import { mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:https";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { chromium } from "playwright-core";

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

const EDGE_URL = new URL(env("EDGE_URL"));
const EDGE_HOST = env("EDGE_HOST");
const LINK_PATH = env("LINK_PATH");
const PASSWORD = env("PASSWORD");
const DESTINATION = env("DESTINATION");
const SCREENSHOT_DIR = env("SCREENSHOT_DIR");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const VISITOR_ADDRESS = "203.0.113.77";

function check(condition, what) {
  if (!condition) throw new Error(`failed: ${what}`);
  console.error(`ok: ${what}`);
}

const destination = new URL(DESTINATION);

// TLS in front of the worker, as Cloudflare's edge: the request goes on with its method, path, headers and body.
// The destination's host is answered here too (a page saying "Arrived"): Playwright's routes see only the first
// request of a redirect chain, so the browser is sent here by its resolver instead.
const proxy = createServer({ cert: readFileSync(env("TLS_CERT")), key: readFileSync(env("TLS_KEY")) }, (req, res) => {
  if (req.headers.host === destination.host) {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<!doctype html><title>Arrived</title><h1>Arrived</h1>");
    return;
  }
  const upstream = httpRequest(
    {
      hostname: EDGE_URL.hostname,
      port: EDGE_URL.port,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, "cf-connecting-ip": VISITOR_ADDRESS },
    },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", (e) => {
    res.writeHead(502);
    res.end(String(e));
  });
  req.pipe(upstream);
});
await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
const proxyPort = proxy.address().port;

mkdirSync(SCREENSHOT_DIR, { recursive: true });
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: [
    "--no-sandbox",
    "--ignore-certificate-errors",
    `--host-resolver-rules=MAP ${EDGE_HOST}:443 127.0.0.1:${proxyPort}, MAP ${destination.host}:443 127.0.0.1:${proxyPort}`,
  ],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const linkUrl = `https://${EDGE_HOST}${LINK_PATH}`;
  const shots = async (name) => {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
      await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}-${width}.png`), fullPage: true });
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  };

  const first = await page.goto(linkUrl);
  check(first.status() === 200, `the form is a 200 (${first.status()})`);
  await page.getByRole("heading", { name: "This link is protected" }).waitFor();
  check(!(await page.content()).includes(destination.host), "the form does not name the destination");
  await shots("password-form");

  await page.getByLabel("Password").fill("not the password");
  await page.getByRole("button", { name: "Continue" }).click();
  await page.getByText("Wrong password. Try again.").waitFor();
  check(page.url() === linkUrl, "a wrong password stays on the link's URL");
  check((await context.cookies()).length === 0, "a wrong password sets no cookie");
  await shots("password-form-wrong");

  await page.getByLabel("Password").fill(PASSWORD);
  await Promise.all([
    page.waitForURL((u) => u.href === DESTINATION),
    page.getByRole("button", { name: "Continue" }).click(),
  ]);
  await page.getByRole("heading", { name: "Arrived" }).waitFor();
  check(page.url() === DESTINATION, `the right password leads to the destination (${page.url()})`);
  const cookies = await context.cookies(linkUrl);
  const cookie = cookies.find((c) => c.name === "sl_pw");
  check(cookie !== undefined, "the browser keeps the link's cookie");
  check(cookie.httpOnly && cookie.secure && cookie.sameSite === "Lax", "HttpOnly, Secure, SameSite=Lax");
  check(cookie.path === LINK_PATH, `scoped to the link's path (${cookie.path})`);
  const day = Date.now() / 1000 + 24 * 3600;
  check(Math.abs(cookie.expires - day) < 120, "remembered for 24 hours");

  // The next visit opens at once.
  await page.goto("about:blank");
  await page.goto(linkUrl);
  check(page.url() === DESTINATION, "the next visit goes straight to the destination");
  // The link's path in capitals is the same link: sent to its lowercase path, where the cookie opens it.
  await page.goto(`https://${EDGE_HOST}${LINK_PATH.toUpperCase()}`);
  check(page.url() === DESTINATION, "the link in capitals opens too");
  // Another browser (no cookie) is asked again.
  const stranger = await browser.newContext();
  const other = await stranger.newPage();
  await other.goto(linkUrl);
  await other.getByRole("heading", { name: "This link is protected" }).waitFor();
  check(true, "a browser without the cookie gets the form");
  await stranger.close();
} finally {
  await browser.close();
  proxy.close();
}
console.error("password-form.mjs: all checks passed");
