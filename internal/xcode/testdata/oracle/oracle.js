// Answers internal/xcode's differential test cases with the real
// @expo/config-plugins (and eas-cli's logic around it, MIT). Reads
// {projects, names, schemeLists} as JSON on stdin, writes the answers.
const fs = require('fs');
const os = require('os');
const path = require('path');
const xcode = require('xcode');
const { IOSConfig } = require('@expo/config-plugins');

const unquote = (v) => {
  if (typeof v !== 'string') return String(v);
  const m = v.match(/^"([\s\S]*)"$/);
  return m ? m[1].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c === 't' ? '\t' : c)) : v;
};

// dump: every XCBuildConfiguration's settings by "target/config", and the
// TargetAttributes by target name, as the xcode package parses text.
function dump(text) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dump-')), 'project.pbxproj');
  fs.writeFileSync(file, text);
  const p = xcode.project(file);
  p.parseSync();
  const objs = p.hash.project.objects;
  const out = { settings: {}, attributes: {} };
  for (const [id, t] of Object.entries(objs.PBXNativeTarget || {})) {
    if (id.endsWith('_comment')) continue;
    const list = objs.XCConfigurationList[t.buildConfigurationList];
    for (const { value } of list.buildConfigurations) {
      const c = objs.XCBuildConfiguration[value];
      const s = {};
      for (const [k, v] of Object.entries(c.buildSettings || {})) {
        s[unquote(k)] = Array.isArray(v) ? v.map(unquote).join(' ') : unquote(v);
      }
      out.settings[unquote(t.name) + '/' + unquote(c.name)] = s;
    }
    for (const [pid, proj] of Object.entries(objs.PBXProject)) {
      if (pid.endsWith('_comment')) continue;
      const a = proj.attributes && proj.attributes.TargetAttributes && proj.attributes.TargetAttributes[id];
      if (a) {
        const s = {};
        for (const [k, v] of Object.entries(a)) if (typeof v !== 'object') s[k] = unquote(v);
        out.attributes[unquote(t.name)] = s;
      }
    }
  }
  return out;
}

// eas-cli's resolveBareProjectDependenciesAsync, names only.
function flatten(target, out) {
  for (const d of target.dependencies || []) {
    if (!d.signable) continue;
    out.push(d.name);
    flatten(d, out);
  }
  return out;
}

async function project(c) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'oracle-'));
  const proj = path.join(root, 'ios', 'App.xcodeproj');
  fs.mkdirSync(path.join(proj, 'xcshareddata', 'xcschemes'), { recursive: true });
  const pbx = path.join(proj, 'project.pbxproj');
  fs.writeFileSync(pbx, c.pbxproj);
  fs.writeFileSync(path.join(proj, 'xcshareddata', 'xcschemes', c.schemeName + '.xcscheme'), c.scheme);
  const res = {};
  const p = IOSConfig.XcodeUtils.getPbxproj(root);
  res.targets = IOSConfig.Target.getNativeTargets(p).map(([, t]) => ({
    name: IOSConfig.XcodeUtils.unquote(t.name),
    productType: IOSConfig.XcodeUtils.unquote(t.productType),
  }));
  try {
    const app = await IOSConfig.Target.findApplicationTargetWithDependenciesAsync(root, c.schemeName);
    res.appTargets = flatten(app, [app.name]);
  } catch (e) {
    res.appTargetsError = String(e.message);
  }
  try {
    res.archiveConfiguration = await IOSConfig.BuildScheme.getArchiveBuildConfigurationForSchemeAsync(root, c.schemeName);
  } catch (e) {
    res.archiveConfiguration = '';
  }
  res.bundleIds = c.bundleIdQueries.map(({ target, config }) => {
    try {
      return IOSConfig.BundleIdentifier.getBundleIdentifierFromPbxproj(root, { targetName: target, buildConfiguration: config }) || '';
    } catch (e) {
      return 'error: ' + e.message;
    }
  });
  if (c.sign) {
    for (const s of c.sign) {
      const opts = { targetName: s.target, buildConfiguration: s.config, appleTeamId: s.team, profileName: s.profile };
      if (s.identity) opts.codeSignIdentity = s.identity;
      IOSConfig.ProvisioningProfile.setProvisioningProfileForPbxproj(root, opts);
    }
    res.signedText = fs.readFileSync(pbx, 'utf8');
    res.signedDump = dump(res.signedText);
    res.oursDump = dump(c.ours);
  }
  return res;
}

function pickScheme(schemes) {
  if (schemes.length === 0) return { error: true };
  if (schemes.length === 1) return { scheme: schemes[0] };
  const sorted = schemes.concat().sort();
  const withoutTvOS = sorted.filter((i) => !i.includes('tvOS'));
  return { scheme: withoutTvOS.length > 0 ? withoutTvOS[0] : sorted[0] };
}

(async () => {
  const input = JSON.parse(fs.readFileSync(0, 'utf8'));
  const out = { projects: [], names: [], schemes: [] };
  for (const c of input.projects || []) out.projects.push(await project(c));
  out.names = (input.names || []).map((n) => IOSConfig.XcodeUtils.sanitizedName(n));
  out.schemes = (input.schemeLists || []).map(pickScheme);
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
