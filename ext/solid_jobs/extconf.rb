# frozen_string_literal: true

# Builds the extension on `gem install` without the rb_sys gem: cargo does
# the work (rb-sys-env in build.rs finds this Ruby), and a generated Makefile
# copies the library where `require "solid_jobs/solid_jobs"` finds it.
require "rbconfig"

root = File.expand_path("../..", __dir__)
dlext = RbConfig::CONFIG["DLEXT"]
target = File.join(root, "target", "release")
dest = File.join(root, "lib", "solid_jobs", "solid_jobs.#{dlext}")

File.write("Makefile", <<~MAKE)
  RUBY := #{RbConfig.ruby}
  all:
  \tcd #{root} && RUBY=$(RUBY) cargo build --release -p solid_jobs
  \tcp #{target}/libsolid_jobs.$(if $(filter bundle,#{dlext}),dylib,so) #{dest}
  install: all
  clean:
  \tcd #{root} && cargo clean -p solid_jobs
MAKE
