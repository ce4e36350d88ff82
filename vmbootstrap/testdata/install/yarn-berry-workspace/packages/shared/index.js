module.exports = require('is-number')(7) ? 'shared works' : 'broken';
