# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# Task's registry of task classes under the GC: thousands of anonymous
# task classes and subclasses, dropped and collected (lazy sweep) while a
# node start reads the registry (Lanes.thread_task_names). Walking Ruby
# 3.1's weak references to classes (Class#subclasses, a WeakMap) here
# handed back classes the GC had found dead but not swept, and the process
# crashed ("[BUG] Segmentation fault", "try to mark T_NONE object") in
# three runs out of three. In a child process: a crash must fail this test,
# not end the suite.
class TaskRegistryGcTest < Minitest::Test
  SCRIPT = <<~RUBY
    require "solid_jobs"
    before = SolidJobs::Task.classes.size
    30.times do
      500.times { parent = Class.new { include SolidJobs::Task }; 3.times { Class.new(parent) } }
      GC.start(full_mark: true, immediate_sweep: false)
      500.times { parent = Class.new { include SolidJobs::Task }; Class.new(parent) }
      SolidJobs::Lanes.thread_task_names
    end
    puts SolidJobs::Task.classes.size - before
  RUBY

  def test_reading_the_registry_survives_collected_task_classes
    out, err, status = Open3.capture3(RbConfig.ruby, "-I", File.expand_path("../lib", __dir__), "-e", SCRIPT)
    assert status.success?, "the process crashed: #{err.lines.first(3).join}"
    assert_equal 30 * (500 * 4 + 500 * 2), Integer(out.lines.last), "every class and subclass registered"
  end
end
