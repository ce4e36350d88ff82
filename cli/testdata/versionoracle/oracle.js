// Reads [{appJson, easJson, platform, profile}] on stdin and answers, for
// each, the version fields eas-cli decides from them with the MIT
// packages it uses: @expo/eas-json (cli.appVersionSource, the profile's
// autoIncrement), @expo/config (the app config with Expo's defaults),
// @expo/config-plugins' Version helpers and node-semver (the patch bump).
const fs = require('fs');
const os = require('os');
const path = require('path');
const { EasJsonAccessor, EasJsonUtils } = require('@expo/eas-json');
const { getConfig, getConfigFilePaths } = require('@expo/config');
const { AndroidConfig, IOSConfig } = require('@expo/config-plugins');
const semver = require('semver');

async function one(c) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'versions-'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"oracle-app","version":"3.4.5"}');
  fs.writeFileSync(path.join(dir, 'app.json'), c.appJson);
  fs.writeFileSync(path.join(dir, 'eas.json'), c.easJson);
  try {
    const accessor = EasJsonAccessor.fromProjectPath(dir);
    const cli = await EasJsonUtils.getCliConfigAsync(accessor);
    const profile = await EasJsonUtils.getBuildProfileAsync(accessor, c.platform, c.profile || undefined);
    const { exp } = getConfig(dir, { skipSDKVersionRequirement: true, isPublicConfig: false });
    const out = {
      appVersionSource: (cli && cli.appVersionSource) || '',
      autoIncrement: profile.autoIncrement === undefined ? null : profile.autoIncrement,
      staticConfig: !!getConfigFilePaths(dir).staticConfigPath,
    };
    if (c.platform === 'android') {
      out.buildVersion = String(AndroidConfig.Version.getVersionCode(exp));
      out.appVersion = AndroidConfig.Version.getVersionName(exp) ?? '1.0.0';
    } else {
      out.buildVersion = IOSConfig.Version.getBuildNumber(exp);
      out.appVersion = IOSConfig.Version.getVersion(exp);
    }
    out.nextAppVersion = semver.valid(out.appVersion) ? semver.inc(out.appVersion, 'patch') : '';
    return out;
  } catch (e) {
    return { error: String(e.message || e) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

(async () => {
  const cases = JSON.parse(fs.readFileSync(0, 'utf8'));
  const out = [];
  for (const c of cases) out.push(await one(c));
  process.stdout.write(JSON.stringify(out));
})();
