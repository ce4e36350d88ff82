// Reads a JSON array of app directories on stdin and prints, for each, what
// @expo/package-manager decides: the workspace root (resolveWorkspaceRoot,
// null when none) and the package manager (resolvePackageManager, null when
// no lockfile decides), or the error it throws.
const { resolvePackageManager, resolveWorkspaceRoot } = require('@expo/package-manager');

let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const out = JSON.parse(input).map((dir) => {
    try {
      return { root: resolveWorkspaceRoot(dir) ?? null, manager: resolvePackageManager(dir) ?? null };
    } catch (e) {
      return { error: String((e && e.message) || e) };
    }
  });
  process.stdout.write(JSON.stringify(out));
});
