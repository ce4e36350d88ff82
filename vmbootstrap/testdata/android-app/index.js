console.log('android-app');
