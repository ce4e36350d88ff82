#!/usr/bin/env node
// Stand-in for the Expo CLI in cli/appconfig's tests: the real @expo/cli
// does not install from the registry the tests can reach, but the
// @expo/config it evaluates app.config.js/ts with does. This implements
// `expo config --json --type public` as @expo/cli does: the public config
// of the project in the working directory, as JSON on stdout.
'use strict';

const args = process.argv.slice(2).join(' ');
if (args !== 'config --json --type public') {
  process.stderr.write(`stand-in expo: unsupported arguments: ${args}\n`);
  process.exit(64);
}

const { getConfig } = require('@expo/config');

try {
  const { exp } = getConfig(process.cwd(), {
    isPublicConfig: true,
    skipSDKVersionRequirement: true,
  });
  process.stdout.write(JSON.stringify(exp) + '\n');
} catch (err) {
  process.stderr.write(String((err && err.stack) || err) + '\n');
  process.exit(1);
}
