# frozen_string_literal: true

# The precompiled (platform) gem: solid-jobs-VERSION-PLATFORM.gem, e.g.
# solid-jobs-0.1.0-x86_64-linux.gem, holding the extension compiled for
# each Ruby ABI (lib/solid_jobs/X.Y/solid_jobs.so, picked by
# lib/solid_jobs/native.rb) and solid-engine-server, without the Rust
# sources. Installing it compiles nothing and needs no cargo.
#
# A release builds it once per platform: run `rake native:compile` under
# each supported Ruby (3.1, 3.2, ...) of that platform, each adding its
# ABI directory to tmp/native, then `rake native:gem` once; the gem's
# required_ruby_version spans the ABIs it holds. `rake native:clean` starts
# over. See README.md, "Use it in your app".
require "rbconfig"
require "fileutils"

module NativeGem
  ROOT = File.expand_path("..", __dir__)
  OUT = File.join(ROOT, "tmp", "native")
  LIB = File.join(OUT, "lib", "solid_jobs")
  PKG = File.join(ROOT, "pkg")

  module_function

  def abi = RUBY_VERSION[/\A\d+\.\d+/]
  def abis = Dir[File.join(LIB, "*", "solid_jobs.#{RbConfig::CONFIG["DLEXT"]}")].map { |f| File.basename(File.dirname(f)) }
  def engine = File.join(LIB, "solid-engine-server")

  # The source gem's spec, minus what only a build needs, plus the
  # binaries; for the ABIs `abis`.
  def spec(abis)
    spec = Gem::Specification.load(File.join(ROOT, "solid_jobs.gemspec"))
    spec.platform = Gem::Platform.local
    spec.extensions = []
    spec.files = spec.files.reject { |f| f.start_with?("ext/", "crates/") || f.start_with?("Cargo.") }
    spec.files += abis.map do |v|
      "lib/solid_jobs/#{v}/solid_jobs.#{RbConfig::CONFIG["DLEXT"]}"
    end + ["lib/solid_jobs/solid-engine-server"]
    versions = abis.map { |v| Gem::Version.new(v) }.sort
    upper = versions.last.segments.then { |major, minor| "#{major}.#{minor + 1}.dev" }
    spec.required_ruby_version = [">= #{versions.first}", "< #{upper}"]
    spec
  end
end

namespace :native do
  desc "Compile the extension for this Ruby into tmp/native/lib/solid_jobs/<X.Y>/ and solid-engine-server (stripped)"
  task :compile do
    require_relative "../ext/solid_jobs/native_build"
    # The checkout's target directory is the cache, as for `rake compile`.
    ENV["CARGO_TARGET_DIR"] ||= File.join(NativeGem::ROOT, "target")
    SolidJobsNativeBuild.build(so: File.join(NativeGem::LIB, NativeGem.abi, "solid_jobs.#{RbConfig::CONFIG["DLEXT"]}"),
                               engine: NativeGem.engine)
  end

  desc "Build pkg/solid-jobs-VERSION-PLATFORM.gem: the extension for every Ruby compiled into tmp/native " \
       "(this one included) and solid-engine-server"
  task gem: :compile do
    require "rubygems/package"
    abis = NativeGem.abis
    spec = NativeGem.spec(abis)
    stage = File.join(NativeGem::OUT, "stage")
    FileUtils.rm_rf(stage)
    spec.files.each do |file|
      from = file.start_with?("lib/solid_jobs/") && !file.end_with?(".rb") ? File.join(NativeGem::OUT,
                                                                                       file) : File.join(NativeGem::ROOT, file)
      FileUtils.mkdir_p(File.join(stage, File.dirname(file)))
      FileUtils.cp(from, File.join(stage, file), preserve: true)
    end
    FileUtils.mkdir_p(NativeGem::PKG)
    Dir.chdir(stage) do
      built = Gem::Package.build(spec)
      FileUtils.mv(built, File.join(NativeGem::PKG, built))
      puts "pkg/#{built}: Ruby #{abis.join(", ")} (required_ruby_version #{spec.required_ruby_version}), " \
           "#{(File.size(File.join(NativeGem::PKG, built)) / 1024.0 / 1024).round(1)} MB"
    end
    FileUtils.rm_rf(stage)
  end

  desc "Remove tmp/native (the compiled ABIs the next native:gem would pack)"
  task :clean do
    FileUtils.rm_rf(NativeGem::OUT)
  end
end
