# frozen_string_literal: true

require "fileutils"
require "rbconfig"
require "tmpdir"
require_relative "../../lib/solid_jobs/version"

# Builds what SolidJobs needs at run time, and only that: the extension
# (solid_jobs.so) and solid-engine-server. Used by `gem install` (through
# extconf.rb's Makefile) and `rake native:gem`.
#
# Cargo works in a target directory outside the gem: a temporary one that
# is removed afterwards, or $CARGO_TARGET_DIR when set (a cache the caller
# keeps; it is left alone). Only the two artifacts are copied out, without
# debug info unless SOLID_JOBS_DEBUG_BUILD=1, so an installed gem holds the
# sources and two stripped files, not cargo's output.
module SolidJobsNativeBuild
  ROOT = File.expand_path("../..", __dir__)
  ENGINE = "solid-engine-server"
  # clang-sys (bindgen, which rb-sys runs on Ruby's headers) looks here,
  # after LIBCLANG_PATH and `llvm-config --libdir`.
  LIBCLANG_DIRS = ["/usr/lib/llvm-*/lib", "/usr/lib64/llvm*/lib", "/usr/lib/*-linux-gnu", "/usr/lib64", "/usr/lib",
                   "/usr/local/lib", "/usr/local/opt/llvm/lib", "/opt/homebrew/opt/llvm/lib",
                   "/Library/Developer/CommandLineTools/usr/lib"].freeze
  LIBCLANG = /\Alibclang(-\d[\d.]*)?\.(so|dylib)(\.[\d.]+)?\z/

  module_function

  def debug? = ENV["SOLID_JOBS_DEBUG_BUILD"] == "1"

  # A checkout's cargo target directory for the Ruby running this: target/,
  # or target/ruby-X.Y on a second Ruby (bin/test --ruby sets
  # SOLID_JOBS_RUBY), so builds for two Rubies do not invalidate each other
  # (rb-sys rebuilds whenever RUBY changes).
  def checkout_target_dir
    return ENV["CARGO_TARGET_DIR"] if ENV["CARGO_TARGET_DIR"] && !ENV["CARGO_TARGET_DIR"].empty?

    File.join(ROOT, "target", *("ruby-#{RUBY_VERSION[/\A\d+\.\d+/]}" if ENV["SOLID_JOBS_RUBY"]))
  end

  def which(command)
    ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |dir| File.join(dir, command) }
       .find { |path| File.file?(path) && File.executable?(path) }
  end

  def libclang?
    dirs = [ENV["LIBCLANG_PATH"]].compact
    if (llvm_config = which("llvm-config"))
      dirs << IO.popen([llvm_config, "--libdir"], err: File::NULL, &:read).strip
    end
    dirs.concat(LIBCLANG_DIRS.flat_map { |pattern| Dir[pattern] })
    dirs.any? { |dir| Dir.exist?(dir) && Dir.children(dir).any? { |f| f.match?(LIBCLANG) } }
  rescue SystemCallError
    false
  end

  # What is missing to compile, as words for the one-line message.
  def missing
    missing = []
    missing << "cargo and rustc (Rust, https://rustup.rs)" unless which("cargo") && which("rustc")
    missing << "Ruby's headers (Debian/Ubuntu: apt-get install ruby-dev)" unless File.file?(File.join(
      RbConfig::CONFIG["rubyhdrdir"].to_s, "ruby.h"
    ))
    unless libclang?
      missing << "libclang (Debian/Ubuntu: apt-get install libclang-dev; Fedora: dnf install clang-devel; " \
                 "macOS: xcode-select --install)"
    end
    missing
  end

  def prerequisites_message(missing)
    "solid-jobs: compiling the native extension needs #{missing.join(" and ")}; install #{missing.size == 1 ? "it" : "them"} " \
      "and retry, or install the precompiled gem for your platform (solid-jobs-#{SolidJobs::VERSION}-#{Gem::Platform.local})"
  end

  # Builds both artifacts and copies them to `so:` and `engine:`.
  def build(so:, engine:)
    target = ENV["CARGO_TARGET_DIR"]
    own = target.nil? || target.empty?
    target = own ? Dir.mktmpdir("solid-jobs-cargo") : File.expand_path(target)
    env = {"RUBY" => RbConfig.ruby, "CARGO_TARGET_DIR" => target}
    # A private target directory caches nothing, so skip generating the
    # debug info that would be stripped anyway; a shared one keeps the
    # workspace profile, so the caller's cache stays valid.
    env["CARGO_PROFILE_RELEASE_DEBUG"] = "0" if own && !debug?
    command = ["cargo", "build", "--release", "--locked", "-p", "solid_jobs", "--lib", "-p", "solid_engine", "--bin", ENGINE]
    puts "solid-jobs: #{command.join(" ")} (target #{target})"
    ok = system(env, *command, chdir: ROOT)
    ok or abort "solid-jobs: cargo build failed (exit #{Process.last_status&.exitstatus}); see the output above"

    dylib = File.join(target, "release",
                      RbConfig::CONFIG["host_os"].match?(/darwin/) ? "libsolid_jobs.dylib" : "libsolid_jobs.so")
    install(dylib, so)
    install(File.join(target, "release", ENGINE), engine)
  ensure
    FileUtils.rm_rf(target) if own && target
  end

  # Copy, strip, then rename into place: a process that has the old file
  # mapped (a running worker) keeps it, and no reader sees half a file.
  def install(from, to)
    FileUtils.mkdir_p(File.dirname(to))
    tmp = "#{to}.#{Process.pid}.tmp"
    FileUtils.cp(from, tmp)
    strip(tmp) unless debug?
    File.chmod(0o755, tmp)
    File.rename(tmp, to)
    puts "solid-jobs: installed #{to} (#{(File.size(to) / 1024.0 / 1024).round(1)} MB)"
  end

  def strip(path)
    tool = which("strip") or return puts("solid-jobs: no `strip` on PATH; #{File.basename(path)} keeps its debug info")
    flag = RbConfig::CONFIG["host_os"].match?(/darwin/) ? "-S" : "--strip-debug"
    system(tool, flag, path) or abort "solid-jobs: #{tool} #{flag} #{path} failed"
  end
end

if $PROGRAM_NAME == __FILE__
  # `ruby native_build.rb SO ENGINE` (the Makefile extconf.rb writes).
  so, engine = ARGV
  abort "usage: native_build.rb SO_PATH ENGINE_PATH" unless so && engine
  SolidJobsNativeBuild.build(so: so, engine: engine)
end
