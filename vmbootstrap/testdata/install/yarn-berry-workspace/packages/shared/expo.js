#!/usr/bin/env node
// Stands in for the Expo CLI: records how it was called, where.
require('fs').writeFileSync('expo-args.txt', process.argv.slice(2).join(' ') + '\n');
