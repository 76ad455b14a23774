# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# What `gem install` runs before compiling (issue 11, failure 5): a machine
# without cargo gets one line saying what to install, not `cargo: not
# found ... make failed`. The build itself (outside the gem directory,
# stripped, nothing left behind) is exercised by test/user_path_test.rb.
class NativeBuildTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)
  EXTCONF = File.join(ROOT, "ext", "solid_jobs", "extconf.rb")

  def test_extconf_says_what_to_install_before_compiling
    Dir.mktmpdir("solid-jobs-extconf") do |dir|
      # A PATH with Ruby but neither cargo nor rustc.
      bin = File.join(dir, "bin")
      Dir.mkdir(bin)
      File.symlink(RbConfig.ruby, File.join(bin, "ruby"))
      env = {"PATH" => bin, "LIBCLANG_PATH" => nil, "RUBYOPT" => nil}
      out, err, status = Open3.capture3(env, RbConfig.ruby, EXTCONF, chdir: dir)
      refute status.success?
      lines = (out + err).lines.map(&:strip).reject(&:empty?)
      assert_equal 1, lines.size, lines.join("\n")
      assert_match(%r{\Asolid-jobs: compiling the native extension needs cargo and rustc \(Rust, https://rustup.rs\)},
                   lines.first)
      assert_match(/precompiled gem for your platform \(solid-jobs-#{Regexp.escape(SolidJobs::VERSION)}-/, lines.first)
      refute File.exist?(File.join(dir, "Makefile")), "no Makefile: make never runs"
    end
  end

  def test_extconf_writes_a_makefile_that_builds_once
    Dir.mktmpdir("solid-jobs-extconf") do |dir|
      out, err, status = Open3.capture3({"RUBYOPT" => nil}, RbConfig.ruby, EXTCONF, chdir: dir)
      assert status.success?, out + err
      makefile = File.read(File.join(dir, "Makefile"))
      assert_match(/^all: \$\(SO\)$/, makefile)
      assert_match(/^install: all$/, makefile, "make install after make does not build again")
      assert_includes makefile, "native_build.rb"
      refute_match(/cargo/, makefile, "cargo runs in native_build.rb, outside the gem directory")
    end
  end
end
