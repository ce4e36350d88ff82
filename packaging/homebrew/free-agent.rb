# Homebrew cask for Free Agent. `make app` writes the release's copy, with
# @VERSION@ and @SHA256@ filled in from the dmg it built, to
# bin/app/free-agent.rb; publish that one in a tap.
cask "free-agent" do
  version "@VERSION@"
  sha256 "@SHA256@"

  url "https://github.com/freeagent-build/freeagent/releases/download/v#{version}/FreeAgent-#{version}.dmg"
  name "Free Agent"
  desc "Turns a Mac into a build worker for Expo and React Native apps"
  homepage "https://github.com/freeagent-build/freeagent"

  depends_on macos: ">= :ventura"
  # Tart (macOS VMs through Virtualization.framework) runs on Apple silicon
  # only, and its formula refuses Intel: say so here, not halfway through
  # the install. The bundle stays universal for the local driver.
  depends_on arch: :arm64
  depends_on formula: "cirruslabs/cli/tart"

  app "FreeAgent.app"
  binary "#{appdir}/FreeAgent.app/Contents/MacOS/freeagent"

  uninstall launchctl: "build.freeagent.agent",
            quit:      "build.freeagent.FreeAgent"

  zap trash: [
    "~/Library/Application Support/FreeAgent",
    "~/Library/LaunchAgents/build.freeagent.agent.plist",
    "~/Library/Logs/FreeAgent",
  ]
end
