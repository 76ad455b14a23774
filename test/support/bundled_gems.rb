# frozen_string_literal: true

# Libraries Ruby 3.4 moved from the standard library to bundled gems, which
# a bundle loads only when its Gemfile lists them. One list for the two
# bundles that need them: the checkout's Gemfile and the test apps' bundle
# (test/support/processes/solid_jobs_command.rb). A plain file with no
# requires, so the Gemfile can read it before any gem is loaded.
module BundledGems
  RUBY_34 = RUBY_VERSION >= "3.4"
  # Active Support 6.1 requires base64, bigdecimal and mutex_m without
  # declaring them (7.1+ declares them itself), and logger (3.4 warns).
  ACTIVE_SUPPORT = (RUBY_34 ? %w[base64 bigdecimal logger mutex_m] : []).freeze
  # benchmark/ writes CSV.
  BENCHMARK = (RUBY_34 ? %w[csv] : []).freeze
end
