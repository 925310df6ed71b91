// Builds the dashboard into dist/ (committed, embedded into warren-daemon by
// crates/warren-daemon/src/ui.rs): dist/app.js + dist/app.css (minified, one bundle
// each) and dist/index.html. Run: npm ci && npm run build.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

mkdirSync("dist", { recursive: true });
await esbuild.build({
  entryPoints: { app: "src/main.ts" },
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  outdir: "dist",
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync("index.html", "dist/index.html");
