package org.gradle.launcher;

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

// The stand-in distribution's launcher (see fakegradle's package doc): the
// class the Gradle wrapper calls. It runs lib/fakegradle next to its jar
// with the wrapper's arguments, in the same directory and environment, and
// exits with its status.
public class GradleMain {
    public static void main(String[] args) throws Exception {
        File jar = new File(GradleMain.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<String> command = new ArrayList<>();
        command.add(new File(jar.getParentFile(), "fakegradle").getPath());
        command.add("run");
        command.addAll(Arrays.asList(args));
        final Process build = new ProcessBuilder(command).inheritIO().start();
        // A stopped wrapper stops the build.
        Runtime.getRuntime().addShutdownHook(new Thread(build::destroy));
        System.exit(build.waitFor());
    }
}
