console.log('my app')
