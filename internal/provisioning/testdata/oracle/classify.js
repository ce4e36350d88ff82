// Reads a JSON array of base64 .mobileprovision files on stdin and answers,
// for each, what eas-cli concludes from it: its
// credentials/ios/utils/provisioningProfile.ts reads the whole file as
// UTF-8 with @expo/plist and tests the keys as below (rewritten here, not
// copied), plus the plist itself with dates as ISO strings and data as
// base64, for comparison with our parser.
const plist = require('@expo/plist').default;

function normalize(v) {
  if (v instanceof Date) return { date: v.toISOString() };
  if (Buffer.isBuffer(v) || v instanceof Uint8Array) return { data: Buffer.from(v).toString('base64') };
  if (Array.isArray(v)) return v.map(normalize);
  if (v && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v).sort()) out[k] = normalize(v[k]);
    return out;
  }
  return v;
}

const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const results = input.map(b64 => {
  let p;
  try {
    p = plist.parse(Buffer.from(b64, 'base64').toString('utf8'));
  } catch (e) {
    return { error: String(e.message || e) };
  }
  const devices = Array.isArray(p.ProvisionedDevices);
  const debug = !!(p.Entitlements && p.Entitlements['get-task-allow']);
  return {
    adHoc: devices && !debug,
    development: devices && debug,
    enterprise: !!p.ProvisionsAllDevices,
    teamId: (p.TeamIdentifier || [])[0] || '',
    name: p.Name,
    plist: normalize(p),
  };
});
process.stdout.write(JSON.stringify(results));
