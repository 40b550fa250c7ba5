// TeX to SVG with MathJax 3 under Node.js, in a sandbox, for the feedback pages (torchlight_grader/nbgrader/feedback.py).
// argv[2]: MathJax's es5 folder. stdin: one JSON list of [tex, display] per line; stdout: for each
// line, one line holding a JSON list of <mjx-container> elements (or null where the TeX has an
// error), in the same order. One program per feedback page, in a sandbox of its own with that
// page's budgets (CPU, memory, output): nothing a student's TeX defines (\def, \renewcommand, \let)
// can reach another page. Ends when stdin ends; on any error it writes the error to stderr and
// exits 1.
const readline = require("readline");
const es5 = process.argv[2];
const MathJax = require(es5 + "/node-main.js");
const fail = (error) => {
  process.stderr.write(String((error && error.stack) || error));
  process.exit(1);
};
let queue = MathJax.init({
  loader: {paths: {mathjax: es5}, load: ["input/tex-full", "output/svg", "ui/safe"]},
  // \require and autoload would load more files (everything needed is in tex-full)
  tex: {packages: {"[-]": ["require", "autoload"]}, tags: "ams"},
  // each formula carries its own glyph paths: nothing shared, nothing to load
  svg: {fontCache: "none"},
});
queue.catch(fail);
readline.createInterface({input: process.stdin, terminal: false}).on("line", (line) => {
  queue = queue.then((mj) => {
    const adaptor = mj.startup.adaptor;
    mj.texReset();  // equation numbers start again for each line, as in a program of its own
    const out = JSON.parse(line).map(([tex, display]) => {
      const node = mj.tex2svg(tex, {display: display});
      const html = adaptor.outerHTML(node);
      return html.includes("data-mjx-error") || html.includes('data-mml-node="merror"') ? null : html;
    });
    process.stdout.write(JSON.stringify(out) + "\n");  // JSON has no raw newline: one line
    return mj;
  });
  queue.catch(fail);
});
