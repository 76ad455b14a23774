# frozen_string_literal: true

require_relative "lib/solid_jobs/version"

Gem::Specification.new do |spec|
  spec.name = "solid-jobs"
  spec.version = SolidJobs::VERSION
  spec.summary = "Background jobs for Ruby with a Rust engine: Ractor workers, fenced claims, never lose a job"
  spec.authors = ["SolidJobs"]
  spec.license = "MIT"
  spec.required_ruby_version = ">= 3.1"
  spec.files = Dir["lib/**/*.rb", "exe/*", "ext/solid_jobs/**/*.{rs,rb,toml}", "crates/**/*.{rs,lua,toml}",
                   "Cargo.toml", "Cargo.lock", "README.md", "docs/*.md"]
  spec.bindir = "exe"
  spec.executables = ["solid-jobs"]
  spec.require_paths = ["lib"]
  spec.extensions = ["ext/solid_jobs/extconf.rb"]
end
