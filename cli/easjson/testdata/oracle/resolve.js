// Differential-test oracle for cli/easjson: the real @expo/eas-json from npm.
//
// stdin: a JSON array of cases {"easJson": "<file contents>", "platform":
// "android"|"ios", "profile": "<name>"|null}. stdout: a JSON array, one
// result per case: {"class": "ok", "profile": {...}, "profileNames": [...],
// "appVersionSource": "..."} or {"class": "<error class>", "message": "..."}.
// The classes are the errors @expo/eas-json throws: syntax (unparsable or
// empty), invalid (the schema refused it), missing-profile, missing-parent,
// chain (too long or cyclic extends).
'use strict';

const { EasJsonAccessor, EasJsonUtils, errors } = require('@expo/eas-json');

function classify(err) {
  const msg = String(err && err.message);
  if (err instanceof errors.MissingProfileError) return 'missing-profile';
  if (err instanceof errors.MissingParentProfileError) return 'missing-parent';
  if (err instanceof errors.InvalidEasJsonError) {
    if (/Found invalid (character|JSON)|is empty/.test(msg)) return 'syntax';
    return 'invalid';
  }
  if (/Too long chain of profile extensions/.test(msg)) return 'chain';
  return 'unexpected';
}

async function run(c) {
  try {
    const accessor = EasJsonAccessor.fromRawString(c.easJson);
    const profileNames = await EasJsonUtils.getBuildProfileNamesAsync(accessor);
    const cli = await EasJsonUtils.getCliConfigAsync(accessor);
    const profile = await EasJsonUtils.getBuildProfileAsync(
      accessor,
      c.platform,
      c.profile === null ? undefined : c.profile
    );
    return {
      class: 'ok',
      profile,
      profileNames,
      appVersionSource: (cli && cli.appVersionSource) || '',
      requireCommit: !!(cli && cli.requireCommit),
    };
  } catch (err) {
    return { class: classify(err), message: String(err && err.message) };
  }
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const cases = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const results = [];
  for (const c of cases) results.push(await run(c));
  process.stdout.write(JSON.stringify(results));
}

main().catch(err => {
  process.stderr.write(String((err && err.stack) || err) + '\n');
  process.exit(1);
});
