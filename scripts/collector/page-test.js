// The collector's web page in headless Chromium (scripts/test-collector.sh):
// the page renders the value task's table and the map task's heat map, and
// the numbers it shows equal the API's.
// usage: NODE_PATH=... node page-test.js BASE_URL TOKEN
const { chromium } = require("playwright-core");
const [base, token] = process.argv.slice(2);

async function api(path) {
  const r = await fetch(base + path, { headers: { Authorization: "Bearer " + token } });
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

(async () => {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const external = [];
  page.on("request", (r) => { if (!r.url().startsWith(base)) external.push(r.url()); });
  await page.goto(base + "/#token=" + encodeURIComponent(token));
  await page.waitForSelector("body[data-loaded='1']", { timeout: 120000 });
  let ok = true;
  const expect = (cond, what) => { console.log((cond ? "  ok   " : "  FAIL ") + what); ok = ok && cond; };

  // Value task: the published period's numbers.
  const est = await api("/v1/tasks/income/estimate");
  const p = est.periods[est.periods.length - 1];
  const row = `section[data-task='income'] tr[data-period='${p.start}']`;
  const shown = async (f) => page.textContent(`${row} td[data-field='${f}']`);
  expect(Number(await shown("n")) === p.n, `reports shown ${await shown("n")} = API ${p.n}`);
  expect(Number(await shown("mean")) === p.estimate.mean, `estimate shown ${await shown("mean")} = API ${p.estimate.mean}`);
  expect(Number(await shown("epsilon")) === p.per_device_epsilon, `per-device ε shown = API ${p.per_device_epsilon}`);
  expect((await shown("ci95")).startsWith("["), `CI shown ${await shown("ci95")}`);

  // Map task: device count, colour scale, a hovered cell's value and SE.
  const m = await api("/v1/tasks/city/map");
  const devices = await page.textContent("section[data-task='city'] [data-field='devices']");
  expect(Number(devices) === m.map.n, `devices shown ${devices} = API ${m.map.n}`);
  expect(await page.$("canvas[data-legend='city']") !== null, "colour scale drawn");
  const canvas = await page.$("canvas[data-task='city']");
  const box = await canvas.boundingBox();
  const k = m.grid_points, scale = box.width / k;
  const i = Math.floor(k / 2), j = Math.floor(k / 3);
  await page.mouse.move(box.x + (i + 0.5) * scale, box.y + (k - 1 - j + 0.5) * scale);
  const tip = await page.textContent("#tip");
  // A kernel map shows value ± SE; an EM map (the planner's pick on some
  // draws of these unseeded reports) the λ = 1 map's 95% interval, in the
  // page's number format (server/src/page.html `fmt`).
  const cell = i * k + j, se = m.map.standard_errors[cell];
  const fmt = (x) => (Math.abs(x) >= 1e4 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(4) : x.toPrecision(5));
  const want = m.map.interval_centres
    ? `density ${m.map.values[cell]}; 95% interval ${fmt(m.map.interval_centres[cell] - 1.96 * se)} to ${fmt(m.map.interval_centres[cell] + 1.96 * se)} (the unbiased map's)`
    : `density ${m.map.values[cell]} ± ${se} (SE)`;
  expect(tip.includes(`cell (${i}, ${j})`) && tip.includes(want), `hover: "${tip}" shows ${want}`);
  // A pixel of the heat map has the colour of its cell's value (not blank).
  const pixel = await page.evaluate(([x, y]) => {
    const c = document.querySelector("canvas[data-task='city']");
    return Array.from(c.getContext("2d").getImageData(x, y, 1, 1).data);
  }, [Math.floor((i + 0.5) * 12), Math.floor((k - 1 - j + 0.5) * 12)]);
  expect(pixel[3] === 255, `heat map pixel drawn (rgba ${pixel})`);
  expect(errors.length === 0, `no script errors ${errors.join("; ")}`);
  expect(external.length === 0, `no external requests ${external.join(", ")}`);
  await browser.close();
  process.exit(ok ? 0 : 1);
})().catch((e) => { console.error(e); process.exit(1); });
