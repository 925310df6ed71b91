// The dashboard end to end in headless Chromium (Debian's chromium, driven by
// playwright-core): load the page with its token, see the zones list, boot a zone from
// the page, see the lifecycle event arrive through the event stream, run a command in
// the web terminal and see its output, see a halt made by the CLI arrive as an event
// (the test runs `warren halt` when it reads the line "e2e: halt it now"). Called by crates/warren/tests/dashboard.rs:
//   DASHBOARD_URL=http://127.0.0.1:PORT/?token=... ZONE=name SHOTS=dir node e2e/dashboard.mjs
// Prints one line per step; exits non-zero (saying why) at the first failure.
import { chromium } from "playwright-core";
import { existsSync } from "node:fs";

const url = process.env.DASHBOARD_URL, zone = process.env.ZONE, shots = process.env.SHOTS;
const exe = process.env.CHROMIUM ?? "/usr/bin/chromium";
if (!url || !zone || !shots) { console.error("set DASHBOARD_URL, ZONE and SHOTS"); process.exit(2); }
if (!existsSync(exe)) { console.error(`${exe} is missing: apt-get install chromium (scripts/test.sh does)`); process.exit(2); }

const step = (s) => console.log(`e2e: ${s}`);
let page = null;
const browser = await chromium.launch({ executablePath: exe, headless: true, args: ["--no-sandbox"] });
try {
  page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));
  await page.goto(url);
  if (new URL(page.url()).search.includes("token")) throw new Error("the token stayed in the address bar");
  const row = page.locator(`#zones tr[data-zone="${zone}"]`);
  await row.waitFor({ timeout: 15000 });
  const state = row.locator("td.state");
  await page.waitForFunction((z) => document.querySelector(`#zones tr[data-zone="${z}"] td.state`)?.textContent === "installed", zone, { timeout: 15000 });
  step(`listed ${zone}: ${await state.textContent()}`);
  await page.waitForSelector("#conn.ok", { timeout: 15000 });
  step("event stream connected");
  await page.screenshot({ path: `${shots}/zones.png` });

  await row.locator('button[data-action="boot"]').click();
  await page.waitForFunction((z) => document.querySelector(`#zones tr[data-zone="${z}"] td.state`)?.textContent === "running", zone, { timeout: 60000 });
  step(`${zone} is running on the page`);
  // The lifecycle event of that boot, through /1.0/events.
  await page.waitForFunction((z) => [...document.querySelectorAll("#events tbody tr")].some((tr) => tr.children[1]?.textContent === "lifecycle" && tr.children[2]?.textContent === z), zone, { timeout: 30000 });
  step(`the boot's lifecycle event of ${zone} arrived through the event stream`);

  // A halt made elsewhere (the test's own stdin line says when) shows without a reload.
  await row.click();
  await page.waitForSelector("#detail:not([hidden])");
  await page.waitForTimeout(7000); // two stat polls: the charts get points
  await page.screenshot({ path: `${shots}/zone-detail.png` });
  step("detail with charts shown");

  await page.click("#term-open");
  await page.waitForFunction(() => !!window.warrenTerminal, null, { timeout: 10000 });
  await page.waitForTimeout(1500);
  await page.keyboard.type("echo dash-$((6*7))-ok\n");
  await page.waitForFunction(() => {
    const b = window.warrenTerminal.buffer.active; let all = "";
    for (let i = 0; i < b.length; i++) all += b.getLine(i)?.translateToString(true) + "\n";
    return /^dash-42-ok$/m.test(all) || all.includes("\ndash-42-ok");
  }, null, { timeout: 30000 });
  step("the web terminal ran a command in the zone and showed its output (dash-42-ok)");
  await page.locator("#terminal").scrollIntoViewIfNeeded();
  await page.screenshot({ path: `${shots}/terminal.png` });

  // A halt made elsewhere (the CLI, run by the test when it reads the next line)
  // reaches the page through the event stream, without a reload.
  step("halt it now");
  await page.waitForFunction((z) => [...document.querySelectorAll("#events tbody tr")].filter((tr) => tr.children[1]?.textContent === "lifecycle" && tr.children[2]?.textContent === z).length >= 2, zone, { timeout: 60000 });
  await page.waitForFunction((z) => document.querySelector(`#zones tr[data-zone="${z}"] td.state`)?.textContent === "installed", zone, { timeout: 30000 });
  step(`the CLI's halt of ${zone} arrived as an event and the page shows it installed`);

  // config set from the detail's form: the table's limits follow.
  await page.fill("#config-kv", "max-processes=50");
  await page.click('#config-form button[type="submit"]');
  await page.waitForFunction((z) => document.querySelector(`#zones tr[data-zone="${z}"] td:nth-child(3)`)?.textContent.includes("max-processes=50"), zone, { timeout: 15000 });
  step(`config set max-processes=50 on ${zone} from the page; the limits column shows it`);

  // clone (asks the name), then delete the clone (asks for confirmation).
  const copy = `${zone}c`;
  page.once("dialog", (d) => d.accept(copy));
  await row.locator('button[data-action="clone"]').click();
  const copyRow = page.locator(`#zones tr[data-zone="${copy}"]`);
  await copyRow.waitFor({ timeout: 60000 });
  step(`cloned ${zone} as ${copy} from the page`);
  let asked = "";
  page.once("dialog", (d) => { asked = d.message(); d.accept(); });
  await copyRow.locator('button[data-action="delete"]').click();
  await copyRow.waitFor({ state: "detached", timeout: 60000 });
  if (!asked.includes("Delete zone")) throw new Error(`delete asked no confirmation (${asked})`);
  step(`deleted ${copy} from the page after confirming`);

  await page.click('a[data-tab="events"]');
  await page.screenshot({ path: `${shots}/events.png` });
  await page.click('a[data-tab="host"]');
  await page.waitForSelector("#memstat tbody tr", { timeout: 15000 });
  step("host memory by kind shown");
  await page.screenshot({ path: `${shots}/memstat.png` });
  await page.click('a[data-tab="doctor"]');
  await page.click("#doctor-run");
  await page.waitForSelector("#doctor tbody tr", { timeout: 60000 });
  step(`doctor's table shown (${await page.locator("#doctor tbody tr").count()} limits)`);
  await page.screenshot({ path: `${shots}/doctor.png` });
  step("PASS");
} catch (e) {
  console.error(`e2e: FAILED: ${e.message}`);
  // What the page showed, to tell why.
  const shown = await page?.evaluate(() => ({
    conn: document.querySelector("#conn")?.textContent,
    toast: document.querySelector("#toast")?.textContent,
    zones: [...document.querySelectorAll("#zones tbody tr")].map((tr) => tr.textContent),
    events: [...document.querySelectorAll("#events tbody tr")].map((tr) => tr.textContent),
  })).catch(() => null);
  console.error(`e2e: the page showed ${JSON.stringify(shown)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
