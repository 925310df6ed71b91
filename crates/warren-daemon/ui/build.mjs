// Builds the dashboard into dist/ (committed, embedded into warren-daemon by
// crates/warren-daemon/src/ui.rs): dist/app.js + dist/app.css (minified, one bundle
// each) and dist/index.html. Run: npm ci && npm run build. The build is reproducible
// (same source and lockfile, same bytes), which tests/dashboard.rs checks.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

// OUT_DIR: build elsewhere (the test that checks dist/ against the source does).
const out = process.env.OUT_DIR ?? "dist";
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: { app: "src/main.ts" },
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  outdir: out,
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync("index.html", `${out}/index.html`);
