# frozen_string_literal: true

# `gem install` runs this, then `make`: the Makefile runs native_build.rb,
# which builds the extension and solid-engine-server with cargo outside the
# gem directory and installs the two stripped files into lib/solid_jobs
# (no rb_sys gem: rb-sys-env in build.rs finds this Ruby through $RUBY).
# What cargo needs is checked first, so a machine without it gets one line
# saying what to install instead of a failed make.
require "rbconfig"
require "shellwords"
require_relative "native_build"

missing = SolidJobsNativeBuild.missing
abort SolidJobsNativeBuild.prerequisites_message(missing) unless missing.empty?

lib = File.join(SolidJobsNativeBuild::ROOT, "lib", "solid_jobs")
so = File.join(lib, "solid_jobs.#{RbConfig::CONFIG["DLEXT"]}")
engine = File.join(lib, SolidJobsNativeBuild::ENGINE)

# `make install` runs after `make`: the extension is the target (one build
# writes both files), so the build (minutes, in a temporary directory)
# runs once. `clean` has nothing to remove: cargo's target directory is
# temporary and already gone, and the two files are the installed result,
# which RubyGems 3.6 (Ruby 3.4) cleans after `make install` as well as
# before the build.
File.write("Makefile", <<~MAKE)
  RUBY := #{RbConfig.ruby.shellescape}
  SO := #{so.shellescape}
  ENGINE := #{engine.shellescape}
  all: $(SO)
  $(SO):
  \t$(RUBY) #{File.join(__dir__, "native_build.rb").shellescape} $(SO) $(ENGINE)
  install: all
  clean:
  .PHONY: all install clean
MAKE
