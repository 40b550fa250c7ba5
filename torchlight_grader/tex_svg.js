// TeX to SVG with MathJax 3 under Node.js, for the feedback pages (torchlight_grader/feedback.py).
// argv[2]: MathJax's es5 folder. stdin: a JSON list of [tex, display]; stdout: a JSON list of
// <mjx-container> elements (or null where the TeX has an error), in the same order.
const es5 = process.argv[2];
const MathJax = require(es5 + "/node-main.js");
let input = "";
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  MathJax.init({
    loader: {paths: {mathjax: es5}, load: ["input/tex-full", "output/svg", "ui/safe"]},
    // \require and autoload would load more files (everything needed is in tex-full)
    tex: {packages: {"[-]": ["require", "autoload"]}, tags: "ams"},
    // each formula carries its own glyph paths: nothing shared, nothing to load
    svg: {fontCache: "none"},
  }).then((mj) => {
    const adaptor = mj.startup.adaptor;
    const out = JSON.parse(input).map(([tex, display]) => {
      const node = mj.tex2svg(tex, {display: display});
      const html = adaptor.outerHTML(node);
      return html.includes("data-mjx-error") || html.includes('data-mml-node="merror"') ? null : html;
    });
    process.stdout.write(JSON.stringify(out));
  }).catch((error) => { process.stderr.write(String(error && error.stack || error)); process.exit(1); });
});
