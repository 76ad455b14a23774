# frozen_string_literal: true

require "minitest/autorun"

# The suite's own rules (docs/decisions.md, decision 52), checked like any
# other behaviour so that a new test cannot quietly break them.
class SuiteHygieneTest < Minitest::Test
  ROOT = File.expand_path("..", __dir__)

  # A fixed sleep in test/ carries its reason on the same or the previous
  # line: a wait for a condition is `eventually`, a poll interval or a
  # simulated job says so.
  def test_every_fixed_sleep_in_the_tests_says_why
    unexplained = Dir[File.join(ROOT, "test", "**", "*.rb")].sort.flat_map do |path|
      lines = File.readlines(path, chomp: true)
      lines.each_index.filter_map do |i|
        next unless lines[i].match?(/\bsleep[ (]+[0-9]/)
        next if lines[i].include?("#") || (i.positive? && lines[i - 1].include?("#"))

        "#{path.delete_prefix("#{ROOT}/")}:#{i + 1}: #{lines[i].strip}"
      end
    end
    assert_empty unexplained, "fixed sleeps without a reason comment:\n#{unexplained.join("\n")}"
  end
end
